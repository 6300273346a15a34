//! Queues: mechanism only. What goes in them, in what order they are searched, and when to
//! wake a sleeper are the worker's business (`runtime::worker`), not theirs.

pub(crate) mod chase_lev;
pub(crate) mod inject;
pub(crate) mod lifo;
pub(crate) mod linked_inject;
pub(crate) mod local;

#[cfg(all(test, loom))]
mod loom_chase_lev;
#[cfg(all(test, loom))]
mod loom_lifo;
#[cfg(all(test, loom))]
mod loom_linked_inject;
#[cfg(all(test, loom))]
mod loom_local;
#[cfg(all(test, not(loom)))]
mod test_items;
#[cfg(test)]
mod test_nodes;
#[cfg(all(test, not(loom)))]
mod tests_chase_lev;
#[cfg(all(test, not(loom)))]
mod tests_linked_inject;
#[cfg(all(test, not(loom)))]
mod tests_local;
