//! Status values stored in `cluster.status`, `nodegroup.status`, `cluster.health_status` and
//! `federation.status`, with the named sets the conductor and API reason about.

use std::fmt;
use std::str::FromStr;

macro_rules! string_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The wire spellings, in declaration order (upstream's order).
            pub const NAMES: &'static [&'static str] = &[$($text),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<$name> for serde_json::Value {
            fn from(s: $name) -> Self {
                serde_json::Value::String(s.as_str().to_owned())
            }
        }

        /// On the wire as its name, as upstream sends it.
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }

        impl FromStr for $name {
            type Err = crate::Error;
            fn from_str(s: &str) -> crate::Result<Self> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(crate::Error::InvalidParameterValue {
                        message: format!(
                            "Invalid value '{other}' for {}", stringify!($name)
                        ),
                    }),
                }
            }
        }
    };
}

string_enum!(
    /// Used for clusters and nodegroups alike.
    ClusterStatus {
        CreateInProgress => "CREATE_IN_PROGRESS",
        CreateFailed => "CREATE_FAILED",
        CreateComplete => "CREATE_COMPLETE",
        UpdateInProgress => "UPDATE_IN_PROGRESS",
        UpdateFailed => "UPDATE_FAILED",
        UpdateComplete => "UPDATE_COMPLETE",
        DeleteInProgress => "DELETE_IN_PROGRESS",
        DeleteFailed => "DELETE_FAILED",
        DeleteComplete => "DELETE_COMPLETE",
        ResumeComplete => "RESUME_COMPLETE",
        ResumeFailed => "RESUME_FAILED",
        RestoreComplete => "RESTORE_COMPLETE",
        RollbackInProgress => "ROLLBACK_IN_PROGRESS",
        RollbackFailed => "ROLLBACK_FAILED",
        RollbackComplete => "ROLLBACK_COMPLETE",
        SnapshotComplete => "SNAPSHOT_COMPLETE",
        CheckComplete => "CHECK_COMPLETE",
        AdoptComplete => "ADOPT_COMPLETE",
    }
);

string_enum!(
    ClusterHealthStatus {
        Healthy => "HEALTHY",
        Unhealthy => "UNHEALTHY",
        Unknown => "UNKNOWN",
    }
);

string_enum!(
    FederationStatus {
        CreateInProgress => "CREATE_IN_PROGRESS",
        CreateFailed => "CREATE_FAILED",
        CreateComplete => "CREATE_COMPLETE",
        UpdateInProgress => "UPDATE_IN_PROGRESS",
        UpdateFailed => "UPDATE_FAILED",
        UpdateComplete => "UPDATE_COMPLETE",
        DeleteInProgress => "DELETE_IN_PROGRESS",
        DeleteFailed => "DELETE_FAILED",
        DeleteComplete => "DELETE_COMPLETE",
    }
);

impl ClusterStatus {
    /// Upstream's STABLE set: a cluster in one of these accepts update, upgrade and CA rotation.
    pub fn is_stable(self) -> bool {
        use ClusterStatus::*;
        matches!(
            self,
            CreateComplete
                | UpdateComplete
                | ResumeComplete
                | RestoreComplete
                | RollbackComplete
                | SnapshotComplete
                | CheckComplete
                | AdoptComplete
        )
    }

    /// STABLE plus UPDATE_IN_PROGRESS and UPDATE_FAILED (resize, credential rotation).
    pub fn is_stable_or_updating(self) -> bool {
        self.is_stable()
            || matches!(
                self,
                ClusterStatus::UpdateInProgress | ClusterStatus::UpdateFailed
            )
    }

    /// The statuses for which the API shows `faults`.
    pub fn is_failed(self) -> bool {
        use ClusterStatus::*;
        matches!(
            self,
            CreateFailed | UpdateFailed | DeleteFailed | RollbackFailed | ResumeFailed
        )
    }

    pub fn is_in_progress(self) -> bool {
        self.stage() == Stage::InProgress
    }

    pub fn is_complete(self) -> bool {
        self.stage() == Stage::Complete
    }

    /// Every `*_IN_PROGRESS` status: the clusters the status sync watches.
    pub const IN_PROGRESS: [ClusterStatus; 4] = [
        ClusterStatus::CreateInProgress,
        ClusterStatus::UpdateInProgress,
        ClusterStatus::DeleteInProgress,
        ClusterStatus::RollbackInProgress,
    ];

    /// The operation the status belongs to (its first word).
    pub fn phase(self) -> Phase {
        use ClusterStatus::*;
        match self {
            CreateInProgress | CreateFailed | CreateComplete => Phase::Create,
            UpdateInProgress | UpdateFailed | UpdateComplete => Phase::Update,
            DeleteInProgress | DeleteFailed | DeleteComplete => Phase::Delete,
            ResumeComplete | ResumeFailed => Phase::Resume,
            RestoreComplete => Phase::Restore,
            RollbackInProgress | RollbackFailed | RollbackComplete => Phase::Rollback,
            SnapshotComplete => Phase::Snapshot,
            CheckComplete => Phase::Check,
            AdoptComplete => Phase::Adopt,
        }
    }

    /// Where the operation stands (the status's last word).
    pub fn stage(self) -> Stage {
        use ClusterStatus::*;
        match self {
            CreateInProgress | UpdateInProgress | DeleteInProgress | RollbackInProgress => {
                Stage::InProgress
            }
            CreateFailed | UpdateFailed | DeleteFailed | ResumeFailed | RollbackFailed => {
                Stage::Failed
            }
            CreateComplete | UpdateComplete | DeleteComplete | ResumeComplete | RestoreComplete
            | RollbackComplete | SnapshotComplete | CheckComplete | AdoptComplete => {
                Stage::Complete
            }
        }
    }

    /// The status of `phase` at `stage`, where Magnum defines one.
    pub fn of(phase: Phase, stage: Stage) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|s| s.phase() == phase && s.stage() == stage)
    }

    /// How an operation in progress ends: its phase's `*_COMPLETE` or `*_FAILED`.
    pub fn finished(self, failed: bool) -> Option<Self> {
        let stage = if failed {
            Stage::Failed
        } else {
            Stage::Complete
        };
        Self::of(self.phase(), stage)
    }
}

/// The operation of a [`ClusterStatus`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    Create,
    Update,
    Delete,
    Resume,
    Restore,
    Rollback,
    Snapshot,
    Check,
    Adopt,
}

/// The stage of a [`ClusterStatus`]'s operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    InProgress,
    Complete,
    Failed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_round_trips() {
        for s in ClusterStatus::ALL {
            assert_eq!(s.as_str().parse::<ClusterStatus>().ok(), Some(*s));
        }
        assert_eq!(ClusterStatus::ALL.len(), 18);
        assert!("create_complete".parse::<ClusterStatus>().is_err());
    }

    #[test]
    fn named_sets_match_upstream() {
        let stable: Vec<_> = ClusterStatus::ALL
            .iter()
            .filter(|s| s.is_stable())
            .collect();
        assert_eq!(stable.len(), 8);
        assert!(ClusterStatus::UpdateFailed.is_stable_or_updating());
        assert!(!ClusterStatus::CreateInProgress.is_stable_or_updating());
        let failed = ClusterStatus::ALL.iter().filter(|s| s.is_failed()).count();
        assert_eq!(failed, 5);
        assert!(ClusterStatus::RollbackInProgress.is_in_progress());
    }

    #[test]
    fn phase_and_stage_are_the_words_of_the_wire_name() {
        for s in ClusterStatus::ALL {
            let name = s.as_str();
            let stage = match s.stage() {
                Stage::InProgress => "_IN_PROGRESS",
                Stage::Complete => "_COMPLETE",
                Stage::Failed => "_FAILED",
            };
            assert!(name.ends_with(stage), "{name}");
            let phase = format!("{:?}", s.phase()).to_uppercase();
            assert_eq!(name.strip_suffix(stage), Some(phase.as_str()));
            assert_eq!(ClusterStatus::of(s.phase(), s.stage()), Some(*s));
        }
        let in_progress: Vec<_> = ClusterStatus::ALL
            .iter()
            .copied()
            .filter(|s| s.is_in_progress())
            .collect();
        assert_eq!(in_progress, ClusterStatus::IN_PROGRESS);
        use ClusterStatus::*;
        assert_eq!(CreateInProgress.finished(false), Some(CreateComplete));
        assert_eq!(RollbackInProgress.finished(true), Some(RollbackFailed));
        // Magnum defines no RESTORE_FAILED.
        assert_eq!(RestoreComplete.finished(true), None);
    }
}
