//! Loom model of the trace ring: a reader racing the writer sees whole events or none.
//!
//! Negative control: `RUSTFLAGS="--cfg loom --cfg magpie_loom_broken"` makes the reader keep
//! torn copies, and the model must then fail (it does: "torn event").

use super::{Kind, TraceBuffer};
use crate::sync::Arc;
use crate::util::loom_support::model;

/// The writer laps a ring of 2 while the reader copies it: every event the reader keeps must
/// be one the writer wrote, whole (time and argument agree), in order.
#[test]
#[cfg_attr(magpie_loom_broken, should_panic)]
fn reader_racing_a_lapping_writer_sees_whole_events() {
    model(Some(3), || {
        let ring = Arc::new(TraceBuffer::new(2));
        let reader = {
            let ring = ring.clone();
            loom::thread::spawn(move || {
                let (events, _) = ring.events();
                let mut last = 0;
                for e in &events {
                    assert_eq!(e.time_ns, e.arg, "torn event {e:?}");
                    assert_eq!(e.kind, Kind::PollStart);
                    assert!(e.arg > last, "out of order: {events:?}");
                    last = e.arg;
                }
                assert!(events.len() <= 2);
                events.len()
            })
        };
        for i in 1..=3u64 {
            ring.record(i, Kind::PollStart, i);
        }
        let _ = reader.join().unwrap();
        let (events, lost) = ring.events();
        let args: Vec<u64> = events.iter().map(|e| e.arg).collect();
        assert_eq!(args, [2, 3]);
        assert_eq!(lost, 1);
    });
}
