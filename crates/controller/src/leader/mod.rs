//! Leader election: the client-go compatible Lease protocol (`lease`), the loop that runs it
//! against the API server (`election`), and the fence that keeps a non-leader from writing
//! (`fence`).

pub mod election;
pub mod fence;
pub mod lease;
