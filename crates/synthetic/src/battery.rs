//! The synthetic battery (`type = "sensor_msgs/msg/BatteryState"`): a
//! 3-cell lithium-ion pack whose voltage follows the channel's `voltage`
//! profile, counted from the stamp of the source's first message, so a
//! test knows exactly which message first reads a new voltage (the first
//! stamped at or after the step). Every other field is a function of that
//! voltage, documented on [`expected_battery`].

use std::time::Duration;

use edgerec_config::VoltageProfile;
use edgerec_format::cdr::{msg, BatteryStateSpec, Time};

/// Cells in series in the synthetic pack.
pub const CELLS: usize = 3;
/// Cell voltage read as empty (0 %).
const CELL_EMPTY_V: f32 = 3.0;
/// Cell voltage read as full (100 %).
const CELL_FULL_V: f32 = 4.2;
/// Pack and cell temperature, degrees Celsius.
pub const TEMPERATURE_C: f32 = 25.0;
/// Current, amperes: discharging.
pub const CURRENT_A: f32 = -2.0;
/// Capacity and design capacity, Ah.
pub const CAPACITY_AH: f32 = 5.0;
/// `location` of every synthetic battery.
pub const LOCATION: &str = "synthetic";
/// `POWER_SUPPLY_STATUS_DISCHARGING`.
const STATUS_DISCHARGING: u8 = 2;
/// `POWER_SUPPLY_HEALTH_GOOD`.
const HEALTH_GOOD: u8 = 1;
/// `POWER_SUPPLY_TECHNOLOGY_LION`.
const TECHNOLOGY_LION: u8 = 2;

/// The numeric fields of one synthetic BatteryState.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatteryReading {
    /// Pack volts, from the profile.
    pub voltage: f32,
    /// Each cell's volts: `voltage / 3`.
    pub cell_voltage: [f32; CELLS],
    /// Charge from 0 to 1.
    pub percentage: f32,
    /// `percentage * capacity`, Ah.
    pub charge: f32,
}

/// The reading `offset` after the source's first message: voltage from
/// `profile`, cells `voltage / 3` each, percentage linear in the cell
/// voltage from 3.0 V (0) to 4.2 V (1), clamped, charge = percentage x 5 Ah.
/// The fixed fields: temperature 25 °C (pack and each cell), current
/// -2 A, capacity and design capacity 5 Ah, status DISCHARGING, health
/// GOOD, technology LION, present, location `synthetic`, and
/// `serial_number` = `seq=` and the sequence number in 20 digits.
pub fn expected_battery(profile: &VoltageProfile, offset: Duration) -> BatteryReading {
    let voltage = profile.at(offset);
    let cell = voltage / CELLS as f32;
    let percentage = ((cell - CELL_EMPTY_V) / (CELL_FULL_V - CELL_EMPTY_V)).clamp(0.0, 1.0);
    BatteryReading {
        voltage,
        cell_voltage: [cell; CELLS],
        percentage,
        charge: percentage * CAPACITY_AH,
    }
}

/// Appends BatteryState number `seq`, stamped `stamp_ns`, `origin_ns` being
/// the stamp of the source's first message.
pub(crate) fn battery_into(
    buf: &mut Vec<u8>,
    profile: &VoltageProfile,
    frame_id: &str,
    seq: u64,
    stamp_ns: u64,
    origin_ns: u64,
) {
    let r = expected_battery(
        profile,
        Duration::from_nanos(stamp_ns.saturating_sub(origin_ns)),
    );
    // Low-rate topic by nature: one small allocation per message is
    // nothing beside the rest of the pipeline's work.
    let serial = format!("seq={seq:020}");
    msg::battery_state_into(
        buf,
        Time::from(stamp_ns),
        frame_id,
        &BatteryStateSpec {
            voltage: r.voltage,
            temperature: TEMPERATURE_C,
            current: CURRENT_A,
            charge: r.charge,
            capacity: CAPACITY_AH,
            design_capacity: CAPACITY_AH,
            percentage: r.percentage,
            power_supply_status: STATUS_DISCHARGING,
            power_supply_health: HEALTH_GOOD,
            power_supply_technology: TECHNOLOGY_LION,
            present: true,
            cell_voltage: &r.cell_voltage,
            cell_temperature: &[TEMPERATURE_C; CELLS],
            location: LOCATION,
            serial_number: &serial,
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentage_follows_the_cell_voltage() {
        let at = |v: f32| expected_battery(&VoltageProfile::constant(v), Duration::ZERO);
        assert_eq!(at(12.6).percentage, 1.0);
        assert_eq!(at(12.6).charge, 5.0);
        assert_eq!(at(9.0).percentage, 0.0);
        assert_eq!(at(5.0).percentage, 0.0, "clamped");
        let half = at(10.8);
        assert!((half.percentage - 0.5).abs() < 1e-6, "{half:?}");
        assert_eq!(half.cell_voltage, [10.8 / 3.0; 3]);
    }
}
