//! The cluster and nodegroup state machines (conductor.md §3): which operation may start from
//! which status, what status it writes when it starts, and what the driver's outcome turns
//! it into. The conductor applies these to a fresh read of the row, never to the caller's copy.
//!
//! Upstream flaw fixed here: nodegroup operations never checked the cluster, so one on a
//! cluster being created or deleted flipped it to UPDATE_IN_PROGRESS. They now need the
//! cluster in STABLE+U as resize does.

use crate::status::ClusterStatus;
use crate::{Error, Result};

/// Something the conductor does to a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterOp {
    Create,
    /// PATCH of node_count.
    Update,
    Resize,
    Upgrade,
    RotateCa,
    NodegroupCreate,
    NodegroupUpdate,
    NodegroupDelete,
    Delete,
    RotateCredentials,
}

/// Which statuses an operation may start from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Precondition {
    /// The row does not exist yet.
    New,
    Stable,
    StableOrUpdating,
    Any,
}

impl ClusterOp {
    fn precondition(self) -> Precondition {
        use ClusterOp::*;
        match self {
            Create => Precondition::New,
            Update | Upgrade | RotateCa => Precondition::Stable,
            Resize | NodegroupCreate | NodegroupUpdate | NodegroupDelete | RotateCredentials => {
                Precondition::StableOrUpdating
            }
            Delete => Precondition::Any,
        }
    }

    /// Upstream's wording for a refused operation (the text reaches the user).
    fn refusal(self, status: &str) -> String {
        use ClusterOp::*;
        let verb = match self {
            Create => "Creating a cluster",
            Update | RotateCa => "Updating a cluster",
            Resize => "Resizing a cluster",
            Upgrade => "Upgrading a cluster",
            NodegroupCreate => "Creating a nodegroup",
            NodegroupUpdate => "Updating a nodegroup",
            NodegroupDelete => "Deleting a nodegroup",
            Delete => "Deleting a cluster",
            RotateCredentials => "Rotating credentials",
        };
        match self {
            NodegroupCreate | NodegroupUpdate | NodegroupDelete | RotateCredentials => {
                format!("{verb} when cluster status is \"{status}\"")
            }
            _ => format!("{verb} when status is \"{status}\""),
        }
    }

    /// The cluster status written when the operation starts; `None` leaves it as it is.
    pub fn started(self) -> Option<ClusterStatus> {
        use ClusterOp::*;
        match self {
            Create => Some(ClusterStatus::CreateInProgress),
            Delete => Some(ClusterStatus::DeleteInProgress),
            RotateCredentials => None,
            _ => Some(ClusterStatus::UpdateInProgress),
        }
    }

    /// The cluster status once the driver reports the outcome.
    pub fn finished(self, success: bool) -> Option<ClusterStatus> {
        use ClusterOp::*;
        match (self, success) {
            (RotateCredentials, _) => None,
            (Create, true) => Some(ClusterStatus::CreateComplete),
            (Create, false) => Some(ClusterStatus::CreateFailed),
            (Delete, true) => Some(ClusterStatus::DeleteComplete),
            (Delete, false) => Some(ClusterStatus::DeleteFailed),
            (_, true) => Some(ClusterStatus::UpdateComplete),
            (_, false) => Some(ClusterStatus::UpdateFailed),
        }
    }

    /// May the operation start on a cluster whose stored status is `current` (`None`: no row
    /// yet, or a status text no release writes, which is never stable)?
    pub fn check(self, current: Option<ClusterStatus>) -> Result<()> {
        let parsed = current;
        let ok = match (self.precondition(), current) {
            (Precondition::New, None) => true,
            (Precondition::New, Some(_)) => false,
            (Precondition::Any, _) => true,
            (Precondition::Stable, _) => parsed.is_some_and(ClusterStatus::is_stable),
            (Precondition::StableOrUpdating, _) => {
                parsed.is_some_and(ClusterStatus::is_stable_or_updating)
            }
        };
        if ok {
            Ok(())
        } else {
            Err(Error::NotSupported {
                operation: self.refusal(current.map_or("None", ClusterStatus::as_str)),
            })
        }
    }
}

/// Something the conductor does to one nodegroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodegroupOp {
    Create,
    Update,
    Delete,
}

impl NodegroupOp {
    pub fn cluster_op(self) -> ClusterOp {
        match self {
            NodegroupOp::Create => ClusterOp::NodegroupCreate,
            NodegroupOp::Update => ClusterOp::NodegroupUpdate,
            NodegroupOp::Delete => ClusterOp::NodegroupDelete,
        }
    }

    /// Upstream: a new nodegroup has no status and passes; update needs the nodegroup in
    /// STABLE+U; delete has no precondition (the API forbids deleting default nodegroups).
    pub fn check(self, nodegroup_status: Option<ClusterStatus>) -> Result<()> {
        let ok = match self {
            NodegroupOp::Create | NodegroupOp::Delete => true,
            NodegroupOp::Update => {
                nodegroup_status.is_some_and(ClusterStatus::is_stable_or_updating)
            }
        };
        if ok {
            Ok(())
        } else {
            Err(Error::NotSupported {
                operation: format!(
                    "Updating a nodegroup when nodegroup status is \"{}\"",
                    nodegroup_status.map_or("None", ClusterStatus::as_str)
                ),
            })
        }
    }

    pub fn started(self) -> ClusterStatus {
        match self {
            NodegroupOp::Create => ClusterStatus::CreateInProgress,
            NodegroupOp::Update => ClusterStatus::UpdateInProgress,
            NodegroupOp::Delete => ClusterStatus::DeleteInProgress,
        }
    }

    pub fn finished(self, success: bool) -> ClusterStatus {
        match (self, success) {
            (NodegroupOp::Create, true) => ClusterStatus::CreateComplete,
            (NodegroupOp::Create, false) => ClusterStatus::CreateFailed,
            (NodegroupOp::Update, true) => ClusterStatus::UpdateComplete,
            (NodegroupOp::Update, false) => ClusterStatus::UpdateFailed,
            (NodegroupOp::Delete, true) => ClusterStatus::DeleteComplete,
            (NodegroupOp::Delete, false) => ClusterStatus::DeleteFailed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ClusterStatus as S;

    /// The full transition table: for every operation and every status, may it start?
    #[test]
    fn cluster_preconditions_for_every_status() {
        let stable = [
            S::CreateComplete,
            S::UpdateComplete,
            S::ResumeComplete,
            S::RestoreComplete,
            S::RollbackComplete,
            S::SnapshotComplete,
            S::CheckComplete,
            S::AdoptComplete,
        ];
        let updating = [S::UpdateInProgress, S::UpdateFailed];
        for status in S::ALL {
            let s = Some(*status);
            let is_stable = stable.contains(status);
            let is_stable_u = is_stable || updating.contains(status);
            for (op, allowed) in [
                (ClusterOp::Update, is_stable),
                (ClusterOp::Upgrade, is_stable),
                (ClusterOp::RotateCa, is_stable),
                (ClusterOp::Resize, is_stable_u),
                (ClusterOp::NodegroupCreate, is_stable_u),
                (ClusterOp::NodegroupUpdate, is_stable_u),
                (ClusterOp::NodegroupDelete, is_stable_u),
                (ClusterOp::RotateCredentials, is_stable_u),
                (ClusterOp::Delete, true),
                (ClusterOp::Create, false),
            ] {
                assert_eq!(op.check(s).is_ok(), allowed, "{op:?} from {status}");
            }
        }
        assert!(ClusterOp::Create.check(None).is_ok());
        assert!(ClusterOp::Update.check(None).is_err());
        assert!(ClusterOp::Delete.check(None).is_ok());
    }

    #[test]
    fn refusals_read_like_upstream() {
        let e = ClusterOp::Update
            .check(Some(S::CreateInProgress))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("Updating a cluster when status is \"CREATE_IN_PROGRESS\" is not supported.")
        );
        let e = ClusterOp::Resize
            .check(Some(S::DeleteFailed))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("Resizing a cluster when status is \"DELETE_FAILED\" is not supported.")
        );
        let e = ClusterOp::NodegroupCreate
            .check(Some(S::DeleteInProgress))
            .err();
        assert_eq!(e.map(|e| e.kind()), Some(crate::ErrorKind::Invalid));
    }

    #[test]
    fn started_and_finished_statuses() {
        assert_eq!(ClusterOp::Create.started(), Some(S::CreateInProgress));
        assert_eq!(ClusterOp::Create.finished(false), Some(S::CreateFailed));
        assert_eq!(ClusterOp::Delete.started(), Some(S::DeleteInProgress));
        assert_eq!(ClusterOp::Delete.finished(true), Some(S::DeleteComplete));
        for op in [
            ClusterOp::Update,
            ClusterOp::Resize,
            ClusterOp::Upgrade,
            ClusterOp::RotateCa,
            ClusterOp::NodegroupDelete,
        ] {
            assert_eq!(op.started(), Some(S::UpdateInProgress), "{op:?}");
            assert_eq!(op.finished(true), Some(S::UpdateComplete));
            assert_eq!(op.finished(false), Some(S::UpdateFailed));
        }
        assert_eq!(ClusterOp::RotateCredentials.started(), None);
        assert_eq!(ClusterOp::RotateCredentials.finished(true), None);
    }

    #[test]
    fn nodegroup_table() {
        assert!(NodegroupOp::Create.check(None).is_ok());
        assert!(NodegroupOp::Delete.check(Some(S::CreateInProgress)).is_ok());
        for status in S::ALL {
            assert_eq!(
                NodegroupOp::Update.check(Some(*status)).is_ok(),
                status.is_stable_or_updating(),
                "{status}"
            );
        }
        assert_eq!(NodegroupOp::Delete.started(), S::DeleteInProgress);
        assert_eq!(NodegroupOp::Create.finished(false), S::CreateFailed);
        assert_eq!(NodegroupOp::Update.cluster_op(), ClusterOp::NodegroupUpdate);
    }
}
