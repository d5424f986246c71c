//! The `[[trigger]]` rules at run time. Each rule's `when` is parsed when
//! the recording starts (a syntax error stops it, with the line and column
//! in the file) and compiled against its topic's message definition when
//! the topic's channel first carries a message (a field the type lacks is
//! logged and shown in the status with the line and column, and the rule
//! stays off). Every message of the topic is then decoded for the fields
//! the condition reads; a payload that does not decode never fires and is
//! counted.

use edgerec_config::ConfigError;
use edgerec_format::msgtype::TypeTable;
use edgerec_source::ChannelSpec;
use edgerec_trigger::{Compiled, Condition, ExprError, RuleState, Transition};

use super::plan::RulePlan;
use super::status::EventsStatus;

/// What a message did to a rule.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fire {
    /// Its condition has held long enough: an event starts.
    Start {
        rule: usize,
        at: u64,
        /// The values read, `path=value` joined by `, `.
        values: String,
        /// The event has no duration (a rule without a condition): it
        /// ends where it starts.
        instant: bool,
    },
    /// Its condition stopped holding: the event ends.
    End { rule: usize, at: u64 },
}

enum Bound {
    /// The topic has not been seen yet.
    Waiting,
    /// Compiled (`None`: no condition, every message fires).
    Ready(Option<Compiled>),
    /// Cannot run; the status says why.
    Off,
}

struct Rule {
    plan: RulePlan,
    condition: Option<Condition>,
    state: RuleState,
    bound: Bound,
}

/// Every rule.
pub(crate) struct Rules {
    rules: Vec<Rule>,
}

/// `err` at its column of `plan.when`.
fn located(plan: &RulePlan, err: &ExprError) -> Box<ConfigError> {
    Box::new(plan.when.error_at(err.column, err.kind.to_string(), None))
}

/// Checks `plan`'s condition against a type known before the recording
/// starts (a synthetic source's): a field the type lacks is a
/// configuration error with the line and column of the field's name.
pub fn check_rule(plan: &RulePlan, type_name: &str, schema: &str) -> Result<(), Box<ConfigError>> {
    if plan.when.text.trim().is_empty() {
        return Ok(());
    }
    let condition = Condition::parse(&plan.when.text).map_err(|e| located(plan, &e))?;
    let types = TypeTable::parse(type_name, schema).map_err(|e| {
        Box::new(plan.when.error_at(
            1,
            format!(
                "the definition of {type_name} ({}) does not parse: {e}",
                plan.topic
            ),
            None,
        ))
    })?;
    condition
        .compile(&types)
        .map(|_| ())
        .map_err(|e| located(plan, &e))
}

impl Rules {
    /// Parses every rule's condition.
    pub(crate) fn new(plans: &[RulePlan]) -> Result<Rules, Box<ConfigError>> {
        let rules = plans
            .iter()
            .map(|p| {
                let condition = if p.when.text.trim().is_empty() {
                    None
                } else {
                    Some(Condition::parse(&p.when.text).map_err(|e| located(p, &e))?)
                };
                Ok(Rule {
                    plan: p.clone(),
                    condition,
                    state: RuleState::new(p.hold_for_ns, p.cooldown_ns),
                    bound: Bound::Waiting,
                })
            })
            .collect::<Result<Vec<_>, Box<ConfigError>>>()?;
        Ok(Rules { rules })
    }

    /// Rule `i`'s plan.
    pub(crate) fn plan(&self, i: usize) -> &RulePlan {
        &self.rules[i].plan
    }

    /// Feeds one message of `spec`'s topic to the rules that read it.
    pub(crate) fn feed(
        &mut self,
        spec: &ChannelSpec,
        log_time: u64,
        payload: &[u8],
        status: &mut EventsStatus,
        out: &mut Vec<Fire>,
    ) {
        for (i, r) in self.rules.iter_mut().enumerate() {
            if r.plan.topic.is_empty() || r.plan.topic != spec.topic {
                continue;
            }
            if matches!(r.bound, Bound::Waiting) {
                r.bound = bind(r, spec, status);
            }
            let (holds, values) = match &r.bound {
                Bound::Off | Bound::Waiting => continue,
                Bound::Ready(None) => (true, String::new()),
                Bound::Ready(Some(c)) => match c.holds(payload) {
                    // The values are read again only when it holds and
                    // the rule may fire: the common path allocates nothing.
                    Ok(true) if !r.state.is_fired() => {
                        let values = c
                            .values(payload)
                            .map(|v| {
                                v.iter()
                                    .map(|r| format!("{}={}", r.path, r.value))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            })
                            .unwrap_or_default();
                        (true, values)
                    }
                    Ok(holds) => (holds, String::new()),
                    Err(_) => {
                        *status.malformed.entry(r.plan.name.clone()).or_insert(0) += 1;
                        if let Some(t) = r.state.update_unknown() {
                            out.push(transition(i, t, String::new(), false));
                        }
                        continue;
                    }
                },
            };
            let instant = matches!(r.bound, Bound::Ready(None));
            if let Some(t) = r.state.update(log_time, holds) {
                out.push(transition(i, t, values, instant));
            }
            if instant {
                // Every message is an event of no duration.
                if let Some(t) = r.state.update(log_time, false) {
                    out.push(transition(i, t, String::new(), true));
                }
            }
        }
    }
}

fn transition(rule: usize, t: Transition, values: String, instant: bool) -> Fire {
    match t {
        Transition::Fired { at_ns, .. } => Fire::Start {
            rule,
            at: at_ns,
            values,
            instant,
        },
        Transition::Cleared { at_ns } => Fire::End { rule, at: at_ns },
    }
}

/// Compiles `r`'s condition against the topic's definition.
fn bind(r: &Rule, spec: &ChannelSpec, status: &mut EventsStatus) -> Bound {
    let Some(condition) = &r.condition else {
        return Bound::Ready(None);
    };
    let schema = String::from_utf8_lossy(&spec.schema);
    let result = TypeTable::parse(&spec.type_name, &schema)
        .map_err(|e| {
            Box::new(r.plan.when.error_at(
                1,
                format!(
                    "{} carries {} whose definition does not parse: {e}",
                    spec.topic, spec.type_name
                ),
                None,
            ))
        })
        .and_then(|types| condition.compile(&types).map_err(|e| located(&r.plan, &e)));
    match result {
        Ok(c) => Bound::Ready(Some(c)),
        Err(e) => {
            tracing::error!("trigger {} is off: {e}", r.plan.name);
            status
                .rule_errors
                .insert(r.plan.name.clone(), e.to_string());
            Bound::Off
        }
    }
}
