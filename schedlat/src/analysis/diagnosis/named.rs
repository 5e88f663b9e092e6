//! A named diagnosis: what every step of the judgement that names a cause
//! gives (capacity.rs, priority.rs, causes.rs), and what the report shows.

use serde::Serialize;

use crate::analysis::holder::NamedHolder;

/// A named diagnosis: a known mechanism that explains the scope's waiting,
/// with its evidence and a next step.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Diagnosis {
    pub name: &'static str,
    /// Roughly, the share of the window it explains; orders the causes.
    pub strength: f64,
    pub evidence: String,
    pub next_step: String,
    /// The holders its evidence names, in its order: the report quotes
    /// what each was running (hottest.rs) under the evidence.
    #[serde(skip)]
    pub holders: Vec<NamedHolder>,
}
