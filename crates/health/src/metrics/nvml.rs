//! GPU queries through NVML, behind [`GpuQuery`] so that tests can stand in
//! for a driver that is not there. `nvml-wrapper` loads `libnvidia-ml.so.1`
//! at run time: the recorder builds and runs without it, and on Jetson,
//! where NVML enumerates the GPU but answers NOT_SUPPORTED for utilisation
//! and temperature, each query that fails falls back to sysfs on its own.

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

/// Why a GPU query gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuQueryError {
    /// The driver does not implement this query on this GPU
    /// (`NVML_ERROR_NOT_SUPPORTED`, as on Orin).
    #[error("NotSupported")]
    NotSupported,
    /// Any other failure, with the driver's words.
    #[error("{0}")]
    Failed(String),
}

impl From<NvmlError> for GpuQueryError {
    fn from(e: NvmlError) -> Self {
        match e {
            NvmlError::NotSupported => GpuQueryError::NotSupported,
            other => GpuQueryError::Failed(other.to_string()),
        }
    }
}

/// The three GPU questions the collector asks; NVML answers them in
/// production ([`NvmlGpu`]), tests inject their own answers.
pub trait GpuQuery: Send {
    /// Percent of the last sample period a kernel ran on the GPU.
    fn gpu_load(&self) -> Result<f64, GpuQueryError>;
    /// GPU die temperature, degrees C.
    fn gpu_temperature(&self) -> Result<f64, GpuQueryError>;
    /// Percent of the last sample period the video encoder was busy.
    fn encoder_load(&self) -> Result<f64, GpuQueryError>;
    /// Names the source in metric origins, e.g. `NVML device 0 (Orin (nvgpu))`.
    fn describe(&self) -> String;
}

/// NVML device 0 (the only GPU of a Jetson).
pub struct NvmlGpu {
    nvml: Nvml,
    name: String,
}

impl NvmlGpu {
    /// Loads `libnvidia-ml.so.1`, initialises NVML and checks that device 0
    /// exists. Fails where the library or the driver is absent: a normal
    /// case that the collector answers with sysfs.
    pub fn init() -> Result<NvmlGpu, GpuQueryError> {
        let nvml = Nvml::init().map_err(|e| GpuQueryError::Failed(e.to_string()))?;
        let name = {
            let device = nvml
                .device_by_index(0)
                .map_err(|e| GpuQueryError::Failed(format!("device 0: {e}")))?;
            device.name().unwrap_or_else(|_| "unnamed".to_string())
        };
        Ok(NvmlGpu { nvml, name })
    }
}

impl GpuQuery for NvmlGpu {
    fn gpu_load(&self) -> Result<f64, GpuQueryError> {
        let device = self.nvml.device_by_index(0)?;
        Ok(f64::from(device.utilization_rates()?.gpu))
    }

    fn gpu_temperature(&self) -> Result<f64, GpuQueryError> {
        let device = self.nvml.device_by_index(0)?;
        Ok(f64::from(device.temperature(TemperatureSensor::Gpu)?))
    }

    fn encoder_load(&self) -> Result<f64, GpuQueryError> {
        let device = self.nvml.device_by_index(0)?;
        Ok(f64::from(device.encoder_utilization()?.utilization))
    }

    fn describe(&self) -> String {
        format!("NVML device 0 ({})", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_supported_is_told_apart() {
        assert_eq!(
            GpuQueryError::from(NvmlError::NotSupported),
            GpuQueryError::NotSupported
        );
        assert!(matches!(
            GpuQueryError::from(NvmlError::GpuLost),
            GpuQueryError::Failed(_)
        ));
        assert_eq!(GpuQueryError::NotSupported.to_string(), "NotSupported");
    }
}
