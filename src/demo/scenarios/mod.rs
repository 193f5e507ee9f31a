//! One file per demo session, each with the scenario that plays it and the texts it uses.

mod backup_cancelled;
mod crash_loop_with_chat;
mod disk_timed_out;
mod ingress_cancelling;
mod latency_orchestrated;
mod node_pending;
mod oom_failed;
mod rollout_in_progress;
mod week_of_alerts;

use super::builder::Demo;

/// Plays every scenario into `d`. Each one sets the clock to its own start, so the order only
/// decides the order of the rows.
pub(super) fn play_all(d: &mut Demo) {
    crash_loop_with_chat::play(d);
    latency_orchestrated::play(d);
    oom_failed::play(d);
    backup_cancelled::play(d);
    disk_timed_out::play(d);
    ingress_cancelling::play(d);
    rollout_in_progress::play(d);
    node_pending::play(d);
    week_of_alerts::play(d);
}
