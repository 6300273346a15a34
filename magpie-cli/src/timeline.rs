//! Reads a Chrome trace (the JSON `Runtime::trace_export` writes) and draws it as a timeline:
//! one lane per worker, time left to right.
//!
//! Events understood (times in microseconds since the runtime started, `tid` = worker):
//! `M` `thread_name` names a lane; `X` spans of category `task` or `job` are *busy* (nested
//! spans count once), of category `park` are *parked*; time in a lane covered by neither is
//! *awake and searching*. `i` instants of category `steal` (with `args.victim`) become arrows
//! from the victim's lane to the thief's (both get a lane), of category `inject` small ticks.
//! `X` spans of category `stall` (the stall monitor's) are drawn in red over their lane,
//! with the task's id, name and spawn location in their tooltip.
//! Anything else is counted and ignored.
//!
//! A drawn event's times must be finite and within ±[`MAX_TIME_US`], and a span's duration
//! from 0 to [`MAX_TIME_US`]; anything else makes [`Timeline::parse`] fail with
//! [`BadTrace::Time`] rather than stretch the time axis to infinity (issue 18 item 7: the
//! axis loop then never ended).
//!
//! To keep the file small whatever the trace's length, each lane is drawn at pixel
//! resolution: every pixel column takes the state that covers most of its time, and runs of
//! equal columns become one rectangle, so a lane has at most one rectangle per pixel. Steal
//! arrows and inject ticks are likewise drawn once per pixel column (and pair of lanes).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Deserialize;

use crate::svg::Svg;

/// The trace file: Chrome's JSON object format.
#[derive(Debug, Deserialize)]
struct TraceFile {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<Event>,
    /// magpie puts `events_lost` here: events its trace rings overwrote before the export.
    #[serde(rename = "otherData", default)]
    other_data: serde_json::Value,
}

#[derive(Debug, Deserialize)]
struct Event {
    #[serde(default)]
    name: String,
    #[serde(default)]
    cat: String,
    ph: String,
    #[serde(default)]
    tid: u64,
    #[serde(default)]
    ts: f64,
    #[serde(default)]
    dur: f64,
    #[serde(default)]
    args: serde_json::Value,
}

/// The largest time a drawn event may have, either side of zero, and the longest span, in
/// microseconds: 2^53 µs, about 285 years. Beyond it an `f64` no longer holds every whole
/// microsecond, so no real trace has such times (Chrome traces of wall-clock time since the
/// Unix epoch are about 2^50.6); and with every time within it, the difference of any two
/// ends stays far from overflow, so the time axis is finite.
pub(crate) const MAX_TIME_US: f64 = 9_007_199_254_740_992.0;

/// Why a trace cannot be drawn.
#[derive(Debug)]
pub(crate) enum BadTrace {
    /// Not JSON, or not shaped like a Chrome trace (a missing `ph`, a string `ts`, …).
    Json(serde_json::Error),
    /// A drawn event's `ts` or `dur` out of range (see [`MAX_TIME_US`]).
    Time {
        /// The event's position in `traceEvents`, from 0.
        index: usize,
        /// `ts` or `dur`.
        field: &'static str,
        value: f64,
    },
    /// More lanes than [`MAX_LANES`].
    TooManyLanes { lanes: usize },
}

/// The most lanes a timeline draws: [`magpie::MAX_WORKERS`], the most workers a runtime can
/// have. Each lane costs a pass over every pixel column, so without a cap a trace of a few
/// hundred MB naming a different thread in each event would take minutes and gigabytes.
pub(crate) const MAX_LANES: usize = magpie::MAX_WORKERS;

impl fmt::Display for BadTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadTrace::Json(err) => write!(f, "not a Chrome trace: {err}"),
            BadTrace::Time {
                index,
                field,
                value,
            } => {
                let allowed = if *field == "dur" {
                    "0 to 2^53 µs"
                } else {
                    "-2^53 to 2^53 µs"
                };
                // `{:e}`: 1e308 printed in full would be 309 digits.
                write!(
                    f,
                    "event {index} has \"{field}\": {value:e}, out of range (allowed: {allowed}, \
                     2^53 µs being about 285 years)"
                )
            }
            BadTrace::TooManyLanes { lanes } => write!(
                f,
                "its events name {lanes} threads; at most {MAX_LANES} can be drawn"
            ),
        }
    }
}

impl From<serde_json::Error> for BadTrace {
    fn from(err: serde_json::Error) -> BadTrace {
        BadTrace::Json(err)
    }
}

/// `value` if it is a time the timeline can draw: finite, within ±[`MAX_TIME_US`], and not
/// negative if `field` is the duration `dur`.
fn checked_time(index: usize, field: &'static str, value: f64) -> Result<f64, BadTrace> {
    let min = if field == "dur" { 0.0 } else { -MAX_TIME_US };
    if (min..=MAX_TIME_US).contains(&value) {
        Ok(value)
    } else {
        Err(BadTrace::Time {
            index,
            field,
            value,
        })
    }
}

/// How many events of each kind a trace held.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(crate) struct Counts {
    pub(crate) total: usize,
    pub(crate) busy_spans: usize,
    pub(crate) park_spans: usize,
    /// Waits for work a worker forked and another took (`join`'s stolen half, a scope).
    pub(crate) wait_spans: usize,
    pub(crate) steals: usize,
    pub(crate) inject_pulls: usize,
    pub(crate) stalls: usize,
    pub(crate) ignored: usize,
    /// Events the runtime's trace rings overwrote before the export (its `events_lost`).
    pub(crate) lost: u64,
}

/// One worker's lane.
#[derive(Debug, Default)]
struct Lane {
    name: Option<String>,
    /// Polls and jobs (busy), waits, parks (in the I/O driver or not): each span with what
    /// it says the worker was doing.
    spans: Vec<(f64, f64, State)>,
    injects: Vec<f64>,
    /// Stalls: the span and its tooltip.
    stalls: Vec<(f64, f64, String)>,
}

impl Lane {
    /// The lane's spans in one of `states`.
    fn spans_in<'a>(&'a self, states: &'a [State]) -> impl Iterator<Item = (f64, f64)> + 'a {
        self.spans
            .iter()
            .filter(|span| states.contains(&span.2))
            .map(|&(from, to, _)| (from, to))
    }

    /// When the lane's first poll or job began, if it ran any.
    fn first_busy(&self) -> Option<f64> {
        self.spans_in(&[State::Busy]).map(|s| s.0).reduce(f64::min)
    }
}

/// One worker's share of a trace ([`Timeline::busy_summary`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct LaneBusy {
    /// The lane's thread id in the trace (the worker's index for magpie's traces).
    pub(crate) worker: u64,
    /// When it first ran a task or job, in µs after the first that any worker ran; `None`
    /// if it ran none.
    pub(crate) first_busy_us: Option<f64>,
    /// How long it ran tasks and jobs, in µs: the time whose innermost span is a poll or a
    /// job, so nested spans count once and a wait or a park inside a job does not count.
    pub(crate) busy_us: f64,
    /// How long it waited, awake, for work it forked and another worker took (spinning or
    /// searching inside `join` or a scope; what it ran meanwhile is busy), in µs.
    pub(crate) waiting_us: f64,
    /// How long it was parked, in µs (in the I/O driver or not, inside a wait or not).
    pub(crate) parked_us: f64,
}

/// A steal: at `ts`, worker `thief` took `count` items from worker `victim`.
#[derive(Debug)]
struct Steal {
    ts: f64,
    thief: u64,
    victim: u64,
}

/// A parsed trace.
#[derive(Debug)]
pub(crate) struct Timeline {
    lanes: BTreeMap<u64, Lane>,
    steals: Vec<Steal>,
    start: f64,
    end: f64,
    pub(crate) counts: Counts,
}

impl Timeline {
    /// Parses the text of a Chrome trace.
    ///
    /// # Errors
    ///
    /// [`BadTrace::Json`] if the text is not a Chrome trace, [`BadTrace::Time`] if an event
    /// to draw has a time out of range, [`BadTrace::TooManyLanes`] if the events name more
    /// than [`MAX_LANES`] threads.
    pub(crate) fn parse(json: &str) -> Result<Timeline, BadTrace> {
        let file: TraceFile = serde_json::from_str(json)?;
        let mut lanes: BTreeMap<u64, Lane> = BTreeMap::new();
        let mut steals = Vec::new();
        let mut counts = Counts {
            total: file.trace_events.len(),
            lost: file.other_data["events_lost"].as_u64().unwrap_or(0),
            ..Counts::default()
        };
        let (mut start, mut end) = (f64::INFINITY, f64::NEG_INFINITY);
        for (index, e) in file.trace_events.into_iter().enumerate() {
            // Only events drawn in a lane make one (not, say, the process's name). Each drawn
            // event gives the time it covers, `[from, to]`: an instant's `dur` means nothing.
            let (from, to) = match (e.ph.as_str(), e.cat.as_str()) {
                ("M", _) if e.name == "thread_name" => {
                    lanes.entry(e.tid).or_default().name =
                        e.args["name"].as_str().map(str::to_string);
                    continue;
                }
                ("X", "task" | "job" | "park" | "wait") => {
                    let ts = checked_time(index, "ts", e.ts)?;
                    let dur = checked_time(index, "dur", e.dur)?;
                    let lane = lanes.entry(e.tid).or_default();
                    let span = (ts, ts + dur);
                    let state = match e.cat.as_str() {
                        "park" if e.args["driver"].as_bool() == Some(true) => State::InDriver,
                        "park" => State::Parked,
                        "wait" => State::Waiting,
                        _ => State::Busy,
                    };
                    *match state {
                        State::Busy => &mut counts.busy_spans,
                        State::Waiting => &mut counts.wait_spans,
                        _ => &mut counts.park_spans,
                    } += 1;
                    lane.spans.push((span.0, span.1, state));
                    span
                }
                ("X", "stall") => {
                    let ts = checked_time(index, "ts", e.ts)?;
                    let dur = checked_time(index, "dur", e.dur)?;
                    let mut what = String::from("stall");
                    if let Some(task) = e.args["task"].as_u64() {
                        what.push_str(&format!(" of task {task}"));
                    }
                    if let Some(name) = e.args["name"].as_str() {
                        what.push_str(&format!(" {name:?}"));
                    }
                    if let Some(location) = e.args["location"].as_str() {
                        what.push_str(&format!(" spawned at {location}"));
                    }
                    what.push_str(&format!(", {}", format_us(dur)));
                    lanes
                        .entry(e.tid)
                        .or_default()
                        .stalls
                        .push((ts, ts + dur, what));
                    counts.stalls += 1;
                    (ts, ts + dur)
                }
                ("i" | "I", "steal") => {
                    let Some(victim) = e.args["victim"].as_u64() else {
                        counts.ignored += 1;
                        continue;
                    };
                    let ts = checked_time(index, "ts", e.ts)?;
                    steals.push(Steal {
                        ts,
                        thief: e.tid,
                        victim,
                    });
                    counts.steals += 1;
                    (ts, ts)
                }
                ("i" | "I", "inject") => {
                    let ts = checked_time(index, "ts", e.ts)?;
                    lanes.entry(e.tid).or_default().injects.push(ts);
                    counts.inject_pulls += 1;
                    (ts, ts)
                }
                _ => {
                    counts.ignored += 1;
                    continue;
                }
            };
            start = start.min(from);
            end = end.max(to);
        }
        // Either side of a steal may be a thread with no event of its own: both get a lane,
        // so that every arrow has two ends.
        for s in &steals {
            lanes.entry(s.victim).or_default();
            lanes.entry(s.thief).or_default();
        }
        if lanes.len() > MAX_LANES {
            return Err(BadTrace::TooManyLanes { lanes: lanes.len() });
        }
        if !start.is_finite() {
            (start, end) = (0.0, 0.0);
        }
        Ok(Timeline {
            lanes,
            steals,
            start,
            end,
            counts,
        })
    }

    pub(crate) fn workers(&self) -> usize {
        self.lanes.len()
    }

    /// The span of time the events cover, in microseconds.
    pub(crate) fn duration_us(&self) -> f64 {
        self.end - self.start
    }

    /// Per worker, in lane order: when it first ran something, and how long it ran things,
    /// waited for work it forked, and was parked (each instant counted once, by its
    /// innermost span). Times are from the first busy span of any worker, so a traced
    /// operation that began on a parked pool shows how late each worker joined it.
    pub(crate) fn busy_summary(&self) -> Vec<LaneBusy> {
        let first = self
            .lanes
            .values()
            .filter_map(Lane::first_busy)
            .reduce(f64::min);
        self.lanes
            .iter()
            .map(|(&tid, lane)| {
                let (mut busy_us, mut waiting_us, mut parked_us) = (0.0, 0.0, 0.0);
                for (from, to, state) in innermost(&lane.spans) {
                    match state {
                        State::Busy => busy_us += to - from,
                        State::Waiting => waiting_us += to - from,
                        _ => parked_us += to - from,
                    }
                }
                LaneBusy {
                    worker: tid,
                    first_busy_us: lane.first_busy().zip(first).map(|(s, first)| s - first),
                    busy_us,
                    waiting_us,
                    parked_us,
                }
            })
            .collect()
    }

    /// Draws the timeline `plot_width` pixels wide (plus margins).
    pub(crate) fn render(&self, plot_width: usize, title: &str) -> String {
        let layout = Layout::new(self, plot_width);
        let mut svg = Svg::new(layout.width, layout.height, STYLE);
        svg.raw(
            "<defs><marker id=\"arrow\" viewBox=\"0 0 6 6\" refX=\"5\" refY=\"3\" \
             markerWidth=\"5\" markerHeight=\"5\" orient=\"auto\">\
             <path d=\"M0,0 L6,3 L0,6 z\" fill=\"#c0392b\"/></marker></defs>",
        );
        svg.text("title", MARGIN_LEFT, 22.0, "start", title);
        for (row, (tid, lane)) in self.lanes.iter().enumerate() {
            let y = layout.lane_y(row);
            let label = lane.name.clone().unwrap_or_else(|| format!("worker {tid}"));
            svg.text(
                "label",
                MARGIN_LEFT - 8.0,
                y + LANE_HEIGHT * 0.7,
                "end",
                &label,
            );
            svg.group_titled(&format!(
                "{label}: {} busy spans, {} parked spans, {} inject pulls",
                lane.spans_in(&[State::Busy]).count(),
                lane.spans_in(&[State::Parked, State::InDriver]).count(),
                lane.injects.len()
            ));
            // With events lost, a lane's record starts at its oldest surviving span: draw
            // nothing before it rather than guess.
            let known_from = if self.counts.lost > 0 {
                lane.spans
                    .iter()
                    .map(|s| s.0)
                    .min_by(f64::total_cmp)
                    .map_or(0, |t| layout.column(t))
            } else {
                0
            };
            for (state, from, to) in layout.runs(lane) {
                if to <= known_from {
                    continue;
                }
                let from = from.max(known_from);
                let class = match state {
                    State::Busy => "busy",
                    State::Waiting => "wait",
                    State::Parked => "park",
                    State::InDriver => "driver",
                    State::Searching => "search",
                };
                svg.rect(
                    class,
                    MARGIN_LEFT + from as f64,
                    y,
                    (to - from) as f64,
                    LANE_HEIGHT,
                );
            }
            // Stalls over the lane's lower third, in red, each with its own tooltip.
            for (from, to, what) in &lane.stalls {
                let (first, last) = (layout.column(*from), layout.column(*to));
                svg.group_titled(what);
                svg.rect(
                    "stall",
                    MARGIN_LEFT + first as f64,
                    y + LANE_HEIGHT * 2.0 / 3.0,
                    (last + 1 - first) as f64,
                    LANE_HEIGHT / 3.0,
                );
                svg.end_group();
            }
            let ticks: BTreeSet<usize> = lane.injects.iter().map(|&t| layout.column(t)).collect();
            for x in ticks {
                let x = MARGIN_LEFT + x as f64 + 0.5;
                svg.line("inject", x, y - 4.0, x, y + 4.0);
            }
            svg.end_group();
        }
        self.draw_steals(&mut svg, &layout);
        layout.draw_axis(&mut svg);
        layout.draw_legend(&mut svg);
        svg.finish()
    }

    fn draw_steals(&self, svg: &mut Svg, layout: &Layout) {
        let rows: BTreeMap<u64, usize> = self
            .lanes
            .keys()
            .enumerate()
            .map(|(r, &t)| (t, r))
            .collect();
        let arrows: BTreeSet<(usize, usize, usize)> = self
            .steals
            .iter()
            .map(|s| (layout.column(s.ts), rows[&s.victim], rows[&s.thief]))
            .collect();
        for (x, victim, thief) in arrows {
            let x = MARGIN_LEFT + x as f64 + 0.5;
            let centre = |row| layout.lane_y(row) + LANE_HEIGHT / 2.0;
            if victim == thief {
                svg.line("steal", x, centre(thief) - 6.0, x, centre(thief) + 6.0);
            } else {
                svg.line("steal", x, centre(victim), x, centre(thief));
            }
        }
    }
}

/// What a worker was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Busy,
    /// Awake inside a wait for work it forked and another worker took.
    Waiting,
    Parked,
    /// Parked in the I/O driver, holding the driver role (most of the column's park).
    InDriver,
    Searching,
}

/// A lane's spans as pieces of time that do not overlap, each in the state of the innermost
/// span over it (the one begun last of those still open: a worker's spans nest), in time
/// order; time under no span is left out.
fn innermost(spans: &[(f64, f64, State)]) -> Vec<(f64, f64, State)> {
    // (time, opens, the span's length, the span): at one time, ends before starts, and of
    // spans starting together the longer (the outer) first.
    let mut edges: Vec<(f64, bool, f64, usize)> = Vec::with_capacity(2 * spans.len());
    for (i, &(from, to, _)) in spans.iter().enumerate() {
        if to > from {
            edges.push((from, true, to - from, i));
            edges.push((to, false, 0.0, i));
        }
    }
    edges.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(a.1.cmp(&b.1))
            .then(b.2.total_cmp(&a.2))
    });
    let mut open: Vec<usize> = Vec::new();
    let mut pieces: Vec<(f64, f64, State)> = Vec::new();
    let mut last = f64::NEG_INFINITY;
    for (time, opens, _, span) in edges {
        if let Some(&top) = open.last() {
            let state = spans[top].2;
            if time > last {
                match pieces.last_mut() {
                    Some((_, to, s)) if *s == state && *to == last => *to = time,
                    _ => pieces.push((last, time, state)),
                }
            }
        }
        last = time;
        if opens {
            open.push(span);
        } else if let Some(at) = open.iter().rposition(|&s| s == span) {
            open.remove(at);
        }
    }
    pieces
}

const MARGIN_LEFT: f64 = 90.0;
const MARGIN_RIGHT: f64 = 30.0;
const TOP: f64 = 40.0;
const LANE_HEIGHT: f64 = 22.0;
const LANE_GAP: f64 = 12.0;
const AXIS_HEIGHT: f64 = 34.0;
const LEGEND_HEIGHT: f64 = 30.0;

const STYLE: &str =
    ".busy{fill:#2e86c1}.wait{fill:#e67e22}.search{fill:#f4d03f}.park{fill:#d5d8dc}.driver{fill:#a3e4d7}.stall{fill:#e74c3c}\
.steal{stroke:#c0392b;stroke-width:1;marker-end:url(#arrow)}.inject{stroke:#1e8449;stroke-width:1}\
.axis{stroke:#555;stroke-width:1}.grid{stroke:#bbb;stroke-width:0.5;stroke-dasharray:2,3}\
.title{font-size:15px;font-weight:bold}.label{font-size:12px}.tick{font-size:11px;fill:#333}";

/// Where things go on the page.
#[derive(Debug)]
struct Layout {
    start: f64,
    /// Microseconds per pixel column.
    scale: f64,
    columns: usize,
    lanes: usize,
    width: f64,
    height: f64,
}

impl Layout {
    fn new(timeline: &Timeline, plot_width: usize) -> Layout {
        let lanes = timeline.lanes.len();
        let columns = plot_width.max(1);
        Layout {
            start: timeline.start,
            scale: (timeline.duration_us() / columns as f64).max(1e-9),
            columns,
            lanes,
            // Wide enough for the legend, however narrow the plot.
            width: MARGIN_LEFT + (columns as f64).max(legend_width()) + MARGIN_RIGHT,
            height: TOP + lanes as f64 * (LANE_HEIGHT + LANE_GAP) + AXIS_HEIGHT + LEGEND_HEIGHT,
        }
    }

    fn lane_y(&self, row: usize) -> f64 {
        TOP + row as f64 * (LANE_HEIGHT + LANE_GAP)
    }

    fn column(&self, ts: f64) -> usize {
        (((ts - self.start) / self.scale).floor().max(0.0) as usize).min(self.columns - 1)
    }

    /// The lane as runs of pixel columns `[from, to)` in one state each: the state that
    /// takes most of the column, by innermost span (a park inside a job is a park).
    fn runs(&self, lane: &Lane) -> Vec<(State, usize, usize)> {
        let pieces = innermost(&lane.spans);
        let of = |wanted: &[State]| -> Vec<f64> {
            let spans: Vec<(f64, f64)> = pieces
                .iter()
                .filter(|p| wanted.contains(&p.2))
                .map(|p| (p.0, p.1))
                .collect();
            self.coverage(&spans)
        };
        let busy = of(&[State::Busy]);
        let waiting = of(&[State::Waiting]);
        let parked = of(&[State::Parked, State::InDriver]);
        let in_driver = of(&[State::InDriver]);
        let mut runs: Vec<(State, usize, usize)> = Vec::new();
        for c in 0..self.columns {
            let searching = self.scale - busy[c] - waiting[c] - parked[c];
            let state = if busy[c] >= waiting[c] && busy[c] >= parked[c] && busy[c] >= searching {
                State::Busy
            } else if waiting[c] >= parked[c] && waiting[c] >= searching {
                State::Waiting
            } else if parked[c] >= searching && 2.0 * in_driver[c] >= parked[c] {
                State::InDriver
            } else if parked[c] >= searching {
                State::Parked
            } else {
                State::Searching
            };
            match runs.last_mut() {
                Some((s, _, to)) if *s == state => *to = c + 1,
                _ => runs.push((state, c, c + 1)),
            }
        }
        runs
    }

    /// Microseconds of each pixel column covered by the union of `spans`.
    fn coverage(&self, spans: &[(f64, f64)]) -> Vec<f64> {
        let mut spans = spans.to_vec();
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Union first: a job running inside another job's span is counted once.
        let mut union: Vec<(f64, f64)> = Vec::with_capacity(spans.len());
        for (s, e) in spans {
            match union.last_mut() {
                Some((_, last_end)) if s <= *last_end => *last_end = last_end.max(e),
                _ => union.push((s, e)),
            }
        }
        let mut cover = vec![0.0; self.columns];
        for (s, e) in union {
            let (first, last) = (self.column(s), self.column(e));
            for (c, slot) in cover.iter_mut().enumerate().take(last + 1).skip(first) {
                let col_start = self.start + c as f64 * self.scale;
                let overlap = e.min(col_start + self.scale) - s.max(col_start);
                *slot += overlap.max(0.0);
            }
        }
        cover
    }

    fn draw_axis(&self, svg: &mut Svg) {
        let y = TOP + self.lanes as f64 * (LANE_HEIGHT + LANE_GAP) - LANE_GAP / 2.0;
        let right = MARGIN_LEFT + self.columns as f64;
        svg.line("axis", MARGIN_LEFT, y, right, y);
        let span = self.scale * self.columns as f64;
        let step = nice_step(span / 8.0);
        let mut t = 0.0;
        while t <= span + step * 1e-6 {
            let x = MARGIN_LEFT + t / self.scale;
            svg.line("grid", x, TOP - 4.0, x, y);
            svg.line("axis", x, y, x, y + 5.0);
            svg.text("tick", x, y + 18.0, "middle", &format_us(t));
            t += step;
        }
        svg.text("tick", right, y + 32.0, "end", "time since the first event");
    }

    fn draw_legend(&self, svg: &mut Svg) {
        let y = self.height - LEGEND_HEIGHT + 8.0;
        let mut x = MARGIN_LEFT;
        for (class, label) in LEGEND {
            let text_x = match class {
                "steal" => {
                    svg.line(class, x, y + 12.0, x + 16.0, y);
                    x + 22.0
                }
                "inject" => {
                    svg.line(class, x + 4.0, y, x + 4.0, y + 12.0);
                    x + 12.0
                }
                _ => {
                    svg.rect(class, x, y, 14.0, 12.0);
                    x + 20.0
                }
            };
            svg.text("label", text_x, y + 10.5, "start", label);
            x += legend_entry_width(label);
        }
    }
}

/// The legend: a CSS class (a filled box, or the steal arrow or inject tick) and its label.
const LEGEND: [(&str, &str); 8] = [
    ("busy", "busy (task poll or job)"),
    ("wait", "waiting in join or scope"),
    ("search", "awake, searching"),
    ("park", "parked"),
    ("driver", "parked in epoll_wait"),
    ("stall", "stall"),
    ("steal", "steal (victim to thief)"),
    ("inject", "inject queue pull"),
];

/// The room a legend entry takes: its key, and 6.5 px per character of its label (about
/// what 12 px sans-serif needs).
fn legend_entry_width(label: &str) -> f64 {
    30.0 + label.chars().count() as f64 * 6.5
}

/// The room the whole legend takes, after the left margin.
fn legend_width() -> f64 {
    LEGEND
        .iter()
        .map(|(_, label)| legend_entry_width(label))
        .sum()
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * power)
}

/// A time in microseconds as a short label: µs, ms or s.
fn format_us(us: f64) -> String {
    let trim = |v: f64, unit: &str| {
        let text = format!("{v:.3}");
        let text = text.trim_end_matches('0').trim_end_matches('.');
        format!("{text} {unit}")
    };
    if us == 0.0 {
        "0".into()
    } else if us < 1e3 {
        trim(us, "µs")
    } else if us < 1e6 {
        trim(us / 1e3, "ms")
    } else {
        trim(us / 1e6, "s")
    }
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{"traceEvents":[
 {"name":"process_name","ph":"M","pid":1,"args":{"name":"magpie runtime 1"}},
 {"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"worker 0"}},
 {"name":"poll","cat":"task","ph":"X","pid":1,"tid":0,"ts":12.345,"dur":3.2,"args":{"task":17}},
 {"name":"job","cat":"job","ph":"X","pid":1,"tid":1,"ts":15.0,"dur":40.1},
 {"name":"job","cat":"job","ph":"X","pid":1,"tid":1,"ts":20.0,"dur":10.0},
 {"name":"parked","cat":"park","ph":"X","pid":1,"tid":1,"ts":60.0,"dur":100.0},
 {"name":"steal","cat":"steal","ph":"i","s":"t","pid":1,"tid":1,"ts":14.9,"args":{"victim":0,"count":3,"kind":"tasks"}},
 {"name":"inject_pull","cat":"inject","ph":"i","s":"t","pid":1,"tid":0,"ts":11.0,"args":{"count":8}}
],"displayTimeUnit":"ns"}"#;

    #[test]
    fn parses_the_sample() {
        let t = Timeline::parse(SAMPLE).unwrap();
        assert_eq!(t.workers(), 2);
        assert_eq!(t.counts.total, 8);
        assert_eq!(t.counts.ignored, 1);
        assert_eq!(t.counts.busy_spans, 3);
        assert_eq!(t.counts.park_spans, 1);
        assert_eq!(t.counts.steals, 1);
        assert_eq!(t.counts.inject_pulls, 1);
        assert_eq!(t.start, 11.0);
        assert_eq!(t.end, 160.0);
    }

    #[test]
    fn busy_summary_counts_nested_spans_once() {
        let t = Timeline::parse(SAMPLE).unwrap();
        // Worker 0 polled at 12.345 for 3.2 µs; worker 1 ran a 40.1 µs job from 15.0 with a
        // nested 10 µs one inside. Times count from 12.345, the first busy span.
        let summary = t.busy_summary();
        assert_eq!(summary.len(), 2);
        assert_eq!(summary[0].worker, 0);
        assert_eq!(summary[0].first_busy_us, Some(0.0));
        assert!((summary[0].busy_us - 3.2).abs() < 1e-9, "{summary:?}");
        assert_eq!(summary[1].worker, 1);
        assert!(
            (summary[1].first_busy_us.unwrap() - 2.655).abs() < 1e-9,
            "{summary:?}"
        );
        assert!((summary[1].busy_us - 40.1).abs() < 1e-9, "{summary:?}");
    }

    #[test]
    fn busy_summary_of_an_idle_worker_has_no_start() {
        let json = r#"{"traceEvents":[
 {"name":"job","cat":"job","ph":"X","tid":0,"ts":5.0,"dur":10.0},
 {"name":"job","cat":"job","ph":"X","tid":0,"ts":12.0,"dur":10.0},
 {"name":"parked","cat":"park","ph":"X","tid":1,"ts":0.0,"dur":30.0}
]}"#;
        let summary = Timeline::parse(json).unwrap().busy_summary();
        // Overlapping (not nested) spans: their union, 5 to 22.
        assert_eq!(summary[0].first_busy_us, Some(0.0));
        assert!((summary[0].busy_us - 17.0).abs() < 1e-9, "{summary:?}");
        assert_eq!(summary[1].first_busy_us, None);
        assert_eq!(summary[1].busy_us, 0.0);
    }

    #[test]
    fn nested_spans_count_once_and_columns_take_the_main_state() {
        let t = Timeline::parse(SAMPLE).unwrap();
        // 149 µs over 149 columns: one µs per column.
        let layout = Layout::new(&t, 149);
        let runs = layout.runs(&t.lanes[&1]);
        assert_eq!(
            runs,
            vec![
                (State::Searching, 0, 4),
                (State::Busy, 4, 44),
                (State::Searching, 44, 49),
                (State::Parked, 49, 149),
            ]
        );
    }

    /// A job that forks, waits for the stolen half (running a job and parking meanwhile),
    /// and goes on.
    const WAIT: &str = r#"{"traceEvents":[
 {"name":"job","cat":"job","ph":"X","tid":0,"ts":0.0,"dur":100.0},
 {"name":"waiting","cat":"wait","ph":"X","tid":0,"ts":20.0,"dur":60.0},
 {"name":"job","cat":"job","ph":"X","tid":0,"ts":30.0,"dur":10.0},
 {"name":"parked","cat":"park","ph":"X","tid":0,"ts":50.0,"dur":20.0}
]}"#;

    #[test]
    fn each_instant_takes_the_state_of_its_innermost_span() {
        use State::*;
        let t = Timeline::parse(WAIT).unwrap();
        assert_eq!(t.counts.wait_spans, 1);
        assert_eq!(
            innermost(&t.lanes[&0].spans),
            vec![
                (0.0, 20.0, Busy),
                (20.0, 30.0, Waiting),
                (30.0, 40.0, Busy),
                (40.0, 50.0, Waiting),
                (50.0, 70.0, Parked),
                (70.0, 80.0, Waiting),
                (80.0, 100.0, Busy),
            ]
        );
        // Spans that start together: the shorter is the inner one; a gap is left out; an
        // empty span changes nothing.
        let spans = [
            (0.0, 10.0, Busy),
            (0.0, 5.0, Waiting),
            (12.0, 15.0, Parked),
            (13.0, 13.0, Busy),
        ];
        assert_eq!(
            innermost(&spans),
            vec![(0.0, 5.0, Waiting), (5.0, 10.0, Busy), (12.0, 15.0, Parked)]
        );
    }

    #[test]
    fn a_wait_and_the_parks_inside_it_are_not_busy() {
        let t = Timeline::parse(WAIT).unwrap();
        let summary = t.busy_summary();
        assert_eq!(summary.len(), 1);
        let lane = &summary[0];
        assert_eq!(
            (lane.busy_us, lane.waiting_us, lane.parked_us),
            (50.0, 30.0, 20.0),
            "{summary:?}"
        );
        let layout = Layout::new(&t, 100);
        assert_eq!(
            layout.runs(&t.lanes[&0]),
            vec![
                (State::Busy, 0, 20),
                (State::Waiting, 20, 30),
                (State::Busy, 30, 40),
                (State::Waiting, 40, 50),
                (State::Parked, 50, 70),
                (State::Waiting, 70, 80),
                (State::Busy, 80, 100),
            ]
        );
        assert!(t.render(100, "wait").contains(r#"class="wait""#));
    }

    #[test]
    fn a_park_in_the_driver_is_drawn_as_its_own_state() {
        let json = r#"{"traceEvents":[
 {"name":"parked in driver","cat":"park","ph":"X","tid":0,"ts":0.0,"dur":50.0,"args":{"driver":true}},
 {"name":"poll","cat":"task","ph":"X","tid":0,"ts":50.0,"dur":10.0,"args":{"task":1}},
 {"name":"parked","cat":"park","ph":"X","tid":0,"ts":60.0,"dur":40.0}
],"displayTimeUnit":"ns"}"#;
        let t = Timeline::parse(json).unwrap();
        assert_eq!(t.counts.park_spans, 2);
        let layout = Layout::new(&t, 100);
        assert_eq!(
            layout.runs(&t.lanes[&0]),
            vec![
                (State::InDriver, 0, 50),
                (State::Busy, 50, 60),
                (State::Parked, 60, 100),
            ]
        );
        assert!(t.render(100, "t").contains("class=\"driver\""));
    }

    #[test]
    fn draws_stalls_in_red_with_their_task() {
        let json = r#"{"traceEvents":[
 {"name":"poll","cat":"task","ph":"X","pid":1,"tid":0,"ts":0.0,"dur":300000.0,"args":{"task":5}},
 {"name":"stall","cat":"stall","ph":"X","cname":"terrible","pid":1,"tid":0,"ts":100000.0,"dur":200000.0,"args":{"task":5,"name":"blocker","location":"src/main.rs:9:5"}}
]}"#;
        let t = Timeline::parse(json).unwrap();
        assert_eq!(t.counts.stalls, 1);
        let svg = t.render(200, "stall");
        assert!(svg.contains(r#"class="stall""#), "{svg}");
        assert!(
            svg.contains("stall of task 5 &quot;blocker&quot; spawned at src/main.rs:9:5"),
            "{svg}"
        );
    }

    #[test]
    fn renders_lanes_arrows_and_legend() {
        let t = Timeline::parse(SAMPLE).unwrap();
        let svg = t.render(400, "sample");
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("worker 0") && svg.contains("worker 1"));
        assert!(svg.contains("class=\"steal\""));
        assert!(svg.contains("class=\"inject\""));
        assert!(svg.contains("parked"));
    }

    #[test]
    fn a_steal_by_a_thread_with_no_other_event_gets_a_lane() {
        // Issue 18 item 6: the thief (tid 7) had no lane, and drawing its arrow panicked.
        let json = r#"{"traceEvents":[
 {"name":"poll","cat":"task","ph":"X","tid":0,"ts":1.0,"dur":3.0},
 {"name":"steal","cat":"steal","ph":"i","tid":7,"ts":2.0,"args":{"victim":0,"count":1}}
]}"#;
        let t = Timeline::parse(json).unwrap();
        assert_eq!(t.workers(), 2);
        let svg = t.render(200, "thief without a lane");
        assert!(svg.contains("worker 7"));
        assert!(svg.contains("class=\"steal\""));
    }

    /// A trace of one event with these fields (JSON text), e.g. `"ph":"X","ts":1`.
    fn one_event(fields: &str) -> String {
        format!(r#"{{"traceEvents":[{{"name":"e","tid":0,{fields}}}]}}"#)
    }

    #[test]
    fn times_out_of_range_are_rejected() {
        // Issue 18 item 7: a span with ts and dur of 1e308 made the time axis infinite, and
        // drawing its ticks never ended.
        for fields in [
            r#""cat":"task","ph":"X","ts":1e308,"dur":1e308"#,
            r#""cat":"task","ph":"X","ts":1e308,"dur":0"#,
            r#""cat":"job","ph":"X","ts":-1e308,"dur":1"#,
            r#""cat":"park","ph":"X","ts":0,"dur":1e308"#,
            r#""cat":"task","ph":"X","ts":0,"dur":-1"#,
            r#""cat":"task","ph":"X","ts":9007199254740994,"dur":0"#,
            r#""cat":"steal","ph":"i","ts":-1e300,"args":{"victim":1}"#,
            r#""cat":"inject","ph":"I","ts":1e20"#,
        ] {
            let err = Timeline::parse(&one_event(fields)).expect_err(fields);
            assert!(
                matches!(err, BadTrace::Time { index: 0, .. }),
                "{fields}: {err:?}"
            );
            let message = err.to_string();
            assert!(message.contains("out of range"), "{message}");
            assert!(message.len() < 200, "{message}");
        }
        // Beyond f64: serde_json refuses the number itself.
        let err = Timeline::parse(&one_event(r#""cat":"task","ph":"X","ts":1e400"#)).unwrap_err();
        assert!(matches!(err, BadTrace::Json(_)), "{err:?}");
        // An instant's `dur` means nothing and is not checked.
        let t = Timeline::parse(&one_event(r#""cat":"inject","ph":"i","ts":5,"dur":1e308"#));
        assert_eq!(t.unwrap().duration_us(), 0.0);
    }

    #[test]
    fn more_lanes_than_workers_are_refused() {
        let names = |lanes: usize| {
            let events: Vec<String> = (0..lanes)
                .map(|tid| format!(r#"{{"name":"thread_name","ph":"M","tid":{tid},"args":{{}}}}"#))
                .collect();
            format!(r#"{{"traceEvents":[{}]}}"#, events.join(","))
        };
        let err = Timeline::parse(&names(MAX_LANES + 1)).unwrap_err();
        assert!(
            matches!(err, BadTrace::TooManyLanes { lanes } if lanes == MAX_LANES + 1),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "its events name 65537 threads; at most 65536 can be drawn"
        );
        assert_eq!(
            Timeline::parse(&names(MAX_LANES)).unwrap().workers(),
            MAX_LANES
        );
    }

    #[test]
    fn the_widest_times_allowed_draw_a_finite_axis() {
        let json = r#"{"traceEvents":[
 {"cat":"task","ph":"X","tid":0,"ts":-9007199254740992,"dur":9007199254740992},
 {"cat":"park","ph":"X","tid":1,"ts":9007199254740992,"dur":9007199254740992}
]}"#;
        let t = Timeline::parse(json).unwrap();
        assert_eq!(t.duration_us(), 3.0 * MAX_TIME_US);
        let svg = t.render(100, "wide");
        let ticks = svg.matches("class=\"grid\"").count();
        assert!((5..=12).contains(&ticks), "{ticks} ticks");
    }

    #[test]
    fn names_and_titles_with_control_characters_draw_well_formed_xml() {
        // Issue 18 item 9: the U+0001 went into the SVG as is.
        let json = r#"{"traceEvents":[
 {"name":"thread_name","ph":"M","tid":0,"args":{"name":"bad\u0001name <&>\"'"}},
 {"cat":"task","ph":"X","tid":0,"ts":1,"dur":2}
]}"#;
        let svg = Timeline::parse(json)
            .unwrap()
            .render(200, "title\u{1b}[31m");
        let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}: {svg}"));
        let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
        assert!(texts.contains(&"bad\u{fffd}name <&>\"'"), "{texts:?}");
        assert!(texts.contains(&"title\u{fffd}[31m"), "{texts:?}");
    }

    #[test]
    fn a_narrow_timeline_is_wide_enough_for_its_legend() {
        // Found by the `fuzz` property: at --width 100 the legend ran 350 px past the page.
        let t = Timeline::parse(SAMPLE).unwrap();
        for width in [100, 300, 700, 2000] {
            let svg = t.render(width, "narrow");
            let doc = roxmltree::Document::parse(&svg).unwrap();
            let page: f64 = doc
                .root_element()
                .attribute("width")
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(
                page,
                MARGIN_LEFT + (width as f64).max(1111.0) + MARGIN_RIGHT
            );
            let last_label = doc
                .descendants()
                .find(|n| n.text() == Some("inject queue pull"))
                .unwrap();
            let x: f64 = last_label.attribute("x").unwrap().parse().unwrap();
            let room = 17.0 * 6.5;
            assert!(
                x + room <= page,
                "{width}: the label ends at {} of {page}",
                x + room
            );
        }
    }

    #[test]
    fn axis_labels() {
        assert_eq!(nice_step(13.0), 20.0);
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(format_us(2500.0), "2.5 ms");
        assert_eq!(format_us(20.0), "20 µs");
        assert_eq!(format_us(3e6), "3 s");
    }
}
