//! Event tracing: one ring buffer of timestamped events per worker, and the export to Chrome's
//! trace format, which Perfetto (ui.perfetto.dev) and chrome://tracing open.
//!
//! Tracing is off unless the runtime was built with [`Builder::trace`](crate::Builder::trace)
//! or `MAGPIE_TRACE=1`. When it is off no buffer exists, and each place that could record an
//! event costs one test of a pointer that the worker never changes (a perfectly predicted
//! branch, measured in BENCHMARKS.md, "Overhead of statistics and tracing").
//!
//! # The ring: one writer, readers at any time
//!
//! Only its worker writes a ring; [`Runtime::trace_export`](crate::Runtime::trace_export) reads
//! every ring while the workers keep running. Each event is two words. The ring is a seqlock
//! per slot, in the shape of a ring buffer:
//!
//! 1. The writer of event number `n` first stores `claimed = n + 1`, then a Release fence,
//!    then the two words of slot `n % capacity`, then `published = n + 1` with Release.
//! 2. A reader loads `published` (Acquire) as `end`, copies the slots of events
//!    `end - capacity .. end`, issues an Acquire fence, and loads `claimed` as `claimed`.
//!    An event `m` it copied is intact if `m + capacity >= claimed`: no writer had claimed
//!    the slot again by then.
//!
//! Invariant: if the reader copied a word that a writer stored after claiming event `k`, the
//! reader's Acquire fence synchronizes with that writer's Release fence (fence-to-fence
//! through the word it read), so its later load of `claimed` sees at least `k + 1` and the
//! torn event `k - capacity` is discarded. Events are therefore either copied whole or
//! dropped, never mixed. A full ring overwrites its oldest events; the export says how many
//! were lost.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::sync::atomic::*;
use crate::sync::AtomicU64;

/// Events each worker keeps, by default: 2^16 (1 MiB per worker), the last few hundred
/// milliseconds of a busy worker.
pub(crate) const DEFAULT_CAPACITY: usize = 1 << 16;

/// What happened. The discriminant is stored in the low byte of an event's first word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// A task poll began; the argument is the task's id.
    PollStart = 1,
    /// The poll ended.
    PollEnd = 2,
    /// A job began to run.
    JobStart = 3,
    /// The job ended.
    JobEnd = 4,
    /// Jobs taken from another worker; the argument is `victim << 32 | count`.
    StealJobs = 5,
    /// Tasks taken from another worker; the argument is `victim << 32 | count`.
    StealTasks = 6,
    /// The worker parked.
    Park = 7,
    /// The worker woke up.
    Unpark = 8,
    /// Tasks pulled from the inject queue; the argument is the count.
    InjectPull = 9,
    /// The worker parked in the I/O driver (`epoll_wait`), holding the driver role; the
    /// next `Unpark` ends it.
    DriverPark = 10,
    /// The worker began to wait for work that another worker took or runs (`join`'s stolen
    /// half, a scope's jobs, another runtime's `install`): it runs other jobs meanwhile,
    /// spins, or parks.
    WaitStart = 11,
    /// The wait ended: the awaited job is done.
    WaitEnd = 12,
}

impl Kind {
    fn from_u8(byte: u8) -> Option<Kind> {
        Some(match byte {
            1 => Kind::PollStart,
            2 => Kind::PollEnd,
            3 => Kind::JobStart,
            4 => Kind::JobEnd,
            5 => Kind::StealJobs,
            6 => Kind::StealTasks,
            7 => Kind::Park,
            8 => Kind::Unpark,
            9 => Kind::InjectPull,
            10 => Kind::DriverPark,
            11 => Kind::WaitStart,
            12 => Kind::WaitEnd,
            _ => return None,
        })
    }
}

/// One decoded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Event {
    /// Nanoseconds since the runtime started.
    pub(crate) time_ns: u64,
    pub(crate) kind: Kind,
    pub(crate) arg: u64,
}

/// One worker's ring of events.
#[derive(Debug)]
pub(crate) struct TraceBuffer {
    /// Per slot: `time_ns << 8 | kind`, then the argument.
    slots: Box<[[AtomicU64; 2]]>,
    /// Events claimed by the writer (rule 1).
    claimed: AtomicU64,
    /// Events fully written (rule 1).
    published: AtomicU64,
}

impl TraceBuffer {
    /// A ring of `capacity` events, rounded up to a power of two.
    pub(crate) fn new(capacity: usize) -> TraceBuffer {
        let capacity = capacity.max(2).next_power_of_two();
        TraceBuffer {
            slots: (0..capacity)
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
            claimed: AtomicU64::new(0),
            published: AtomicU64::new(0),
        }
    }

    /// Records an event. Only the owning worker calls this.
    #[inline]
    pub(crate) fn record(&self, time_ns: u64, kind: Kind, arg: u64) {
        // Relaxed: we are the only writer of both counters.
        let n = self.published.load(Relaxed);
        self.claimed.store(n + 1, Relaxed);
        // Release: pairs with the reader's Acquire fence in `events` (module doc, rule 2):
        // a reader that sees a word stored below also sees this claim.
        fence(Release);
        let slot = &self.slots[(n as usize) & (self.slots.len() - 1)];
        // Relaxed: ordered by the fences (claim) and the Release store below (publish).
        slot[0].store(time_ns << 8 | kind as u64, Relaxed);
        slot[1].store(arg, Relaxed);
        // Release: pairs with the Acquire load of `published` in `events`.
        self.published.store(n + 1, Release);
    }

    /// Events recorded so far, including those overwritten since.
    pub(crate) fn recorded(&self) -> u64 {
        // Relaxed: a statistic.
        self.published.load(Relaxed)
    }

    /// The events still in the ring, oldest first, and how many were lost (overwritten, or
    /// torn by a concurrent write).
    pub(crate) fn events(&self) -> (Vec<Event>, u64) {
        let capacity = self.slots.len() as u64;
        // Acquire: pairs with the Release store of `published` in `record`.
        let end = self.published.load(Acquire);
        let start = end.saturating_sub(capacity);
        let mut copied = Vec::with_capacity((end - start) as usize);
        for n in start..end {
            let slot = &self.slots[(n as usize) & (self.slots.len() - 1)];
            // Relaxed: validated by the fence and `claimed` below.
            copied.push((n, slot[0].load(Relaxed), slot[1].load(Relaxed)));
        }
        // Acquire: pairs with the writer's Release fence in `record` (module doc, invariant).
        fence(Acquire);
        // Relaxed: ordered by the fence above.
        let claimed = self.claimed.load(Relaxed);
        // With `--cfg magpie_loom_broken` (a negative control for the loom model) every
        // copied event is kept, torn or not.
        let intact_from = if cfg!(magpie_loom_broken) {
            0
        } else {
            claimed.saturating_sub(capacity)
        };
        let events: Vec<Event> = copied
            .into_iter()
            .filter(|&(n, _, _)| n >= intact_from)
            .filter_map(|(_, word, arg)| {
                Some(Event {
                    time_ns: word >> 8,
                    kind: Kind::from_u8(word as u8)?,
                    arg,
                })
            })
            .collect();
        let lost = end - events.len() as u64;
        (events, lost)
    }
}

/// A stall as the trace shows it (recorded by the stall monitor, `runtime/monitor.rs`, not
/// in a worker's ring: only the worker writes its ring).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StallSpan {
    pub(crate) worker: usize,
    /// Nanoseconds since the runtime started: the monitor's first sample of the unit.
    pub(crate) start_ns: u64,
    /// The first sample that saw the unit over; `None` while it runs.
    pub(crate) end_ns: Option<u64>,
    /// The task's id, name and spawn location; `None`s for a job.
    pub(crate) task: Option<u64>,
    pub(crate) name: Option<String>,
    pub(crate) location: Option<String>,
}

/// `text` as the inside of a JSON string.
fn json_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Writes the events of every worker (index = position in `workers`) as Chrome trace JSON.
///
/// Polls and jobs become complete ("X") spans, parks become "parked" spans, a worker's wait for
/// a job it forked and another worker took a "waiting" span (category `wait`; the jobs it ran
/// and the parks it made meanwhile lie inside it), steals and inject pulls instant ("i")
/// events with their arguments. Times are microseconds since the runtime
/// started. A span still open (a poll or a job running, a park going on) ends at `now_ns`,
/// the time of the export. Stalls become "stall" spans on their worker's track, in Chrome's
/// red (`"cname":"terrible"`), with the task's id, name and location.
pub(crate) fn write_chrome_json(
    out: &mut impl Write,
    workers: &[(Vec<Event>, u64)],
    stalls: &[StallSpan],
    runtime_id: usize,
    now_ns: u64,
) -> io::Result<()> {
    let mut json = JsonEvents::default();
    json.push(format_args!(
        r#"{{"name":"process_name","ph":"M","pid":1,"args":{{"name":"magpie runtime {runtime_id}"}}}}"#
    ));
    let mut lost_total = 0;
    for (worker, (events, lost)) in workers.iter().enumerate() {
        lost_total += lost;
        json.push(format_args!(
            r#"{{"name":"thread_name","ph":"M","pid":1,"tid":{worker},"args":{{"name":"worker {worker}"}}}}"#
        ));
        // Open spans: (kind of the start event, start time, argument). Spans nest (a job
        // inside a job, a job inside a poll); an end whose start was overwritten is skipped.
        let mut open: Vec<(Kind, u64, u64)> = Vec::new();
        for event in events {
            let ts = micros(event.time_ns);
            match event.kind {
                Kind::PollStart
                | Kind::JobStart
                | Kind::Park
                | Kind::DriverPark
                | Kind::WaitStart => {
                    open.push((event.kind, event.time_ns, event.arg));
                }
                Kind::PollEnd | Kind::JobEnd | Kind::Unpark | Kind::WaitEnd => {
                    let start_kind = match event.kind {
                        Kind::PollEnd => Kind::PollStart,
                        Kind::JobEnd => Kind::JobStart,
                        Kind::WaitEnd => Kind::WaitStart,
                        _ => Kind::Park,
                    };
                    let matches = |k: Kind| {
                        k == start_kind || (start_kind == Kind::Park && k == Kind::DriverPark)
                    };
                    if let Some(at) = open.iter().rposition(|&(k, _, _)| matches(k)) {
                        let (kind, start, arg) = open.remove(at);
                        json.span(worker, kind, start, event.time_ns, arg);
                    }
                }
                Kind::StealJobs | Kind::StealTasks => {
                    let victim = event.arg >> 32;
                    let count = event.arg & 0xffff_ffff;
                    let kind = if event.kind == Kind::StealJobs {
                        "jobs"
                    } else {
                        "tasks"
                    };
                    json.push(format_args!(
                        r#"{{"name":"steal","cat":"steal","ph":"i","s":"t","pid":1,"tid":{worker},"ts":{ts:.3},"args":{{"victim":{victim},"count":{count},"kind":"{kind}"}}}}"#
                    ));
                }
                Kind::InjectPull => json.push(format_args!(
                    r#"{{"name":"inject_pull","cat":"inject","ph":"i","s":"t","pid":1,"tid":{worker},"ts":{ts:.3},"args":{{"count":{}}}}}"#,
                    event.arg
                )),
            }
            json.flush_if_large(out)?;
        }
        while let Some((kind, start, arg)) = open.pop() {
            json.span(worker, kind, start, now_ns.max(start), arg);
        }
    }
    for stall in stalls {
        let end = stall.end_ns.unwrap_or(now_ns).max(stall.start_ns);
        let (ts, dur) = (micros(stall.start_ns), micros(end - stall.start_ns));
        let worker = stall.worker;
        let mut args = String::new();
        if let Some(task) = stall.task {
            let _ = write!(args, r#""task":{task}"#);
        }
        for (key, value) in [("name", &stall.name), ("location", &stall.location)] {
            if let Some(value) = value {
                let sep = if args.is_empty() { "" } else { "," };
                let _ = write!(args, r#"{sep}"{key}":"{}""#, json_escape(value));
            }
        }
        json.push(format_args!(
            r#"{{"name":"stall","cat":"stall","ph":"X","cname":"terrible","pid":1,"tid":{worker},"ts":{ts:.3},"dur":{dur:.3},"args":{{{args}}}}}"#
        ));
    }
    let _ = write!(
        json.text,
        "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{{\"runtime\":{runtime_id},\"events_lost\":{lost_total}}}}}\n"
    );
    out.write_all(json.text.as_bytes())?;
    out.flush()
}

fn micros(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The `traceEvents` array being written.
#[derive(Debug)]
struct JsonEvents {
    text: String,
    first: bool,
}

impl Default for JsonEvents {
    fn default() -> JsonEvents {
        JsonEvents {
            text: String::from("{\"traceEvents\":[\n"),
            first: true,
        }
    }
}

impl JsonEvents {
    fn push(&mut self, event: std::fmt::Arguments<'_>) {
        if !self.first {
            self.text.push_str(",\n");
        }
        self.first = false;
        // Writing into a String cannot fail.
        let _ = self.text.write_fmt(event);
    }

    /// A complete span of the kind that `start_kind` begins.
    fn span(&mut self, worker: usize, start_kind: Kind, start: u64, end: u64, arg: u64) {
        let (ts, dur) = (micros(start), micros(end.saturating_sub(start)));
        match start_kind {
            Kind::PollStart => self.push(format_args!(
                r#"{{"name":"poll","cat":"task","ph":"X","pid":1,"tid":{worker},"ts":{ts:.3},"dur":{dur:.3},"args":{{"task":{arg}}}}}"#
            )),
            Kind::JobStart => self.push(format_args!(
                r#"{{"name":"job","cat":"job","ph":"X","pid":1,"tid":{worker},"ts":{ts:.3},"dur":{dur:.3}}}"#
            )),
            Kind::DriverPark => self.push(format_args!(
                r#"{{"name":"parked in driver","cat":"park","ph":"X","pid":1,"tid":{worker},"ts":{ts:.3},"dur":{dur:.3},"args":{{"driver":true}}}}"#
            )),
            Kind::WaitStart => self.push(format_args!(
                r#"{{"name":"waiting","cat":"wait","ph":"X","pid":1,"tid":{worker},"ts":{ts:.3},"dur":{dur:.3}}}"#
            )),
            _ => self.push(format_args!(
                r#"{{"name":"parked","cat":"park","ph":"X","pid":1,"tid":{worker},"ts":{ts:.3},"dur":{dur:.3}}}"#
            )),
        }
    }

    /// Writes out what has accumulated once it passes 1 MiB.
    fn flush_if_large(&mut self, out: &mut impl Write) -> io::Result<()> {
        if self.text.len() > 1 << 20 {
            out.write_all(self.text.as_bytes())?;
            self.text.clear();
        }
        Ok(())
    }
}

#[cfg(all(test, loom))]
#[path = "loom_trace.rs"]
mod loom_trace;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_events_and_counts_the_lost() {
        let ring = TraceBuffer::new(4);
        for i in 0..6 {
            ring.record(i * 10, Kind::InjectPull, i);
        }
        let (events, lost) = ring.events();
        assert_eq!(lost, 2);
        assert_eq!(ring.recorded(), 6);
        let args: Vec<u64> = events.iter().map(|e| e.arg).collect();
        assert_eq!(args, [2, 3, 4, 5]);
        assert!(events.iter().all(|e| e.time_ns == e.arg * 10));
    }

    #[test]
    fn concurrent_reads_see_whole_events_only() {
        let ring = std::sync::Arc::new(TraceBuffer::new(64));
        let writer = {
            let ring = ring.clone();
            std::thread::spawn(move || {
                // Under Miri a few turns of the ring (200,000 events took 3.3 minutes):
                // its data race detector and weak memory emulation check each read.
                for i in 0..if cfg!(miri) { 5_000u64 } else { 200_000 } {
                    // time and argument agree, so a torn event would show.
                    ring.record(i, Kind::PollStart, i);
                }
            })
        };
        let mut seen = 0;
        while !writer.is_finished() {
            let (events, _) = ring.events();
            for e in &events {
                assert_eq!(e.time_ns, e.arg, "torn event");
                assert_eq!(e.kind, Kind::PollStart);
            }
            seen += events.len();
        }
        writer.join().unwrap();
        assert_eq!(ring.events().0.len(), 64);
        let _ = seen;
    }

    #[test]
    fn chrome_json_pairs_spans_and_skips_orphans() {
        let events = vec![
            Event {
                time_ns: 500,
                kind: Kind::PollEnd,
                arg: 0,
            }, // orphan: skipped
            Event {
                time_ns: 1_000,
                kind: Kind::JobStart,
                arg: 0,
            },
            Event {
                time_ns: 1_500,
                kind: Kind::StealTasks,
                arg: 1 << 32 | 3,
            },
            Event {
                time_ns: 3_000,
                kind: Kind::JobEnd,
                arg: 0,
            },
            Event {
                time_ns: 4_000,
                kind: Kind::Park,
                arg: 0,
            },
            Event {
                time_ns: 9_000,
                kind: Kind::Unpark,
                arg: 0,
            },
            Event {
                time_ns: 10_000,
                kind: Kind::PollStart,
                arg: 42,
            }, // still running
        ];
        let mut out = Vec::new();
        write_chrome_json(&mut out, &[(events, 0)], &[], 7, 20_000).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                r#""name":"job","cat":"job","ph":"X","pid":1,"tid":0,"ts":1.000,"dur":2.000"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#""name":"parked""#) && text.contains(r#""dur":5.000"#),
            "{text}"
        );
        assert!(
            text.contains(r#""victim":1,"count":3,"kind":"tasks""#),
            "{text}"
        );
        // The orphan end is skipped; the running poll ends at the export (20 µs).
        assert_eq!(text.matches(r#""name":"poll""#).count(), 1, "{text}");
        assert!(
            text.contains(r#""ts":10.000,"dur":10.000,"args":{"task":42}"#),
            "{text}"
        );
        assert!(text.contains(r#""events_lost":0"#), "{text}");
    }

    #[test]
    fn a_wait_becomes_a_span_around_what_ran_in_it() {
        // A job forks, waits for the stolen half, runs another job meanwhile, parks, and
        // goes on once the half is done.
        let at = |time_ns, kind| Event {
            time_ns,
            kind,
            arg: 0,
        };
        let events = vec![
            at(1_000, Kind::JobStart),
            at(2_000, Kind::WaitStart),
            at(2_500, Kind::JobStart),
            at(3_500, Kind::JobEnd),
            at(4_000, Kind::Park),
            at(6_000, Kind::Unpark),
            at(6_500, Kind::WaitEnd),
            at(8_000, Kind::JobEnd),
            at(9_000, Kind::WaitEnd), // orphan: skipped
        ];
        let mut out = Vec::new();
        write_chrome_json(&mut out, &[(events, 0)], &[], 0, 10_000).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches(r#""cat":"wait""#).count(), 1, "{text}");
        assert!(
            text.contains(
                r#""name":"waiting","cat":"wait","ph":"X","pid":1,"tid":0,"ts":2.000,"dur":4.500"#
            ),
            "{text}"
        );
        // The outer job still spans the whole, the inner one its own µs.
        assert!(text.contains(r#""ts":1.000,"dur":7.000"#), "{text}");
        assert!(text.contains(r#""ts":2.500,"dur":1.000"#), "{text}");
        assert!(text.contains(r#""ts":4.000,"dur":2.000"#), "{text}");
    }
}
