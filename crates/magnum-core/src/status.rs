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
        self.as_str().ends_with("_IN_PROGRESS")
    }
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
}
