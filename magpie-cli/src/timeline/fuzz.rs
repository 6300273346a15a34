//! Keeps issue 18's trace defects out: random Chrome traces through [`Timeline::parse`] and
//! [`Timeline::render`], as `magpie trace --input` runs them.
//!
//! The traces are JSON text built from pieces chosen to hurt: times of 1e308, -1e308, 2^53
//! and its neighbours, numbers beyond `f64` (1e309) and beyond `u64`, negative durations;
//! fields missing or of the wrong type; thread ids nobody else names, steals from and by
//! them; names full of control characters, `<>&"'`, U+FFFE and U+FFFF; and now and then the
//! text cut short. Whatever comes in, parsing either fails with a message or gives a
//! timeline whose drawing is well-formed XML (read back by roxmltree, a strict parser), of a
//! size bounded by the input's, with every rectangle on the page. Nothing is timed: a hang
//! shows up as a test that does not finish.

use proptest::prelude::*;

use super::*;

/// A time as JSON text that the timeline accepts: mostly an ordinary one, else an edge
/// (2^53, the smallest subnormal, a negative zero). `negative`: below zero too (a `ts`, not
/// a `dur`).
fn time(negative: bool) -> BoxedStrategy<String> {
    let mut edges = vec![
        "0",
        "-0",
        "4.9e-324",
        "1e15",
        "9007199254740991",
        "9007199254740992",
    ];
    if negative {
        edges.extend(["-3", "-2.5e-7", "-9007199254740992"]);
    }
    prop_oneof![
        8 => (0.0..1e4f64).prop_map(|v| v.to_string()),
        1 => prop::sample::select(edges).prop_map(str::to_string),
    ]
    .boxed()
}

/// A number as JSON text that fits an `f64` but is no time the timeline accepts (or no
/// `dur`): 1e308 and its kin, just past 2^53, past `u64`, negative.
fn absurd_time() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "1e308",
            "-1e308",
            "1.7976931348623157e308",
            "9007199254740993",
            "-9007199254740994",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-1",
        ])
        .prop_map(str::to_string),
        1 => any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |v| v.is_finite())
            .prop_map(|v| format!("{v:e}")),
        1 => any::<i64>().prop_map(|v| v.to_string()),
    ]
}

/// A time, or now and then an absurd one if `hostile`.
fn maybe_absurd_time(negative: bool, hostile: bool) -> BoxedStrategy<String> {
    if hostile {
        prop_oneof![8 => time(negative), 1 => absurd_time()].boxed()
    } else {
        time(negative)
    }
}

/// A number as JSON text that serde_json reads: a time or an absurd one.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![2 => time(true), 1 => absurd_time()]
}

/// Any number as JSON text: [`number`], or one serde_json refuses (1e309).
fn any_number() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => number(),
        1 => prop::sample::select(vec!["1e309", "-1e400", "1e99999"]).prop_map(str::to_string),
    ]
}

/// A character, often one XML or a terminal would choke on.
fn nasty_char() -> impl Strategy<Value = char> {
    prop_oneof![
        2 => prop::sample::select(vec![
            '\0', '\u{1}', '\u{8}', '\t', '\n', '\u{b}', '\u{c}', '\r', '\u{1b}', '\u{1f}',
            '\u{7f}', '\u{85}', '<', '>', '&', '"', '\'', '\\', '\u{fffe}', '\u{ffff}',
            '\u{10ffff}', 'µ',
        ]),
        3 => any::<char>(),
        3 => prop::char::range('a', 'z'),
    ]
}

/// A name: a few nasty characters.
fn name() -> impl Strategy<Value = String> {
    prop::collection::vec(nasty_char(), 0..16).prop_map(String::from_iter)
}

/// A string as JSON text (escaped by serde_json): a name, or a word the timeline knows.
fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => prop::sample::select(vec![
            "thread_name", "poll", "task", "job", "park", "steal", "inject", "X", "i", "I", "M",
        ])
        .prop_map(str::to_string),
        2 => name(),
    ]
    .prop_map(|s: String| json_string(&s))
}

/// `text` as a JSON string.
fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string encodes")
}

/// A value of some other type, for a field that expects a number or a string.
fn wrong_type() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["null", "true", "[]", "{}", "[1,2]", "{\"a\":1}"])
        .prop_map(str::to_string)
}

/// A thread id: mostly a few small ones, so that events share lanes; sometimes one no other
/// event names.
fn tid() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0u64..5).prop_map(|t| t.to_string()),
        1 => any::<u64>().prop_map(|t| t.to_string()),
    ]
}

/// A field `"key": value`, or nothing (the field missing).
fn field(
    key: &'static str,
    value: impl Strategy<Value = String>,
) -> impl Strategy<Value = Option<String>> {
    prop::option::weighted(0.85, value.prop_map(move |v| format!("\"{key}\":{v}")))
}

/// An object of these fields, the missing ones left out.
fn object(fields: impl IntoIterator<Item = Option<String>>) -> String {
    let fields: Vec<String> = fields.into_iter().flatten().collect();
    format!("{{{}}}", fields.join(","))
}

/// An event of a kind the timeline draws, well-typed, its times accepted unless `hostile`
/// makes one absurd now and then: a span, a steal, an inject pull or a thread's name.
fn drawn_event(hostile: bool) -> impl Strategy<Value = String> {
    let span = (
        prop::sample::select(vec!["task", "job", "park"]),
        tid(),
        maybe_absurd_time(true, hostile),
        maybe_absurd_time(false, hostile),
    )
        .prop_map(|(cat, tid, ts, dur)| {
            format!(r#"{{"name":"x","cat":"{cat}","ph":"X","tid":{tid},"ts":{ts},"dur":{dur}}}"#)
        });
    let steal = (
        prop::sample::select(vec!["i", "I"]),
        tid(),
        maybe_absurd_time(true, hostile),
        tid(),
    )
        .prop_map(|(ph, tid, ts, victim)| {
            format!(
                r#"{{"name":"steal","cat":"steal","ph":"{ph}","tid":{tid},"ts":{ts},"args":{{"victim":{victim},"count":1}}}}"#
            )
        });
    let inject = (tid(), maybe_absurd_time(true, hostile)).prop_map(|(tid, ts)| {
        format!(r#"{{"name":"inject_pull","cat":"inject","ph":"i","tid":{tid},"ts":{ts}}}"#)
    });
    let thread_name = (tid(), name()).prop_map(|(tid, name)| {
        let name = json_string(&name);
        format!(r#"{{"name":"thread_name","ph":"M","tid":{tid},"args":{{"name":{name}}}}}"#)
    });
    prop_oneof![4 => span, 2 => steal, 1 => inject, 2 => thread_name]
}

/// `args` (any JSON: the timeline reads it as a `serde_json::Value`): mostly an object with
/// a name, a victim and a count, each perhaps missing or of another type. Its numbers are
/// all ones serde_json reads if `typed`.
fn args(typed: bool) -> impl Strategy<Value = String> {
    let number = move || {
        if typed {
            number().boxed()
        } else {
            any_number().boxed()
        }
    };
    let fields = (
        field("name", prop_oneof![3 => string(), 1 => wrong_type()]),
        field(
            "victim",
            prop_oneof![3 => tid(), 1 => number(), 1 => string(), 1 => wrong_type()],
        ),
        field("count", number()),
    )
        .prop_map(|(a, b, c)| object([a, b, c]));
    prop_oneof![6 => fields, 1 => wrong_type(), 1 => number()]
}

/// An event of any shape: unknown phases and categories, fields missing; unless `typed`,
/// also fields of the wrong type, numbers `f64` cannot hold, and no `ph` (which the timeline
/// requires).
fn any_event(typed: bool) -> impl Strategy<Value = String> {
    let any = move |value: BoxedStrategy<String>| {
        if typed {
            value
        } else {
            prop_oneof![4 => value, 1 => wrong_type(), 1 => any_number(), 1 => string()].boxed()
        }
    };
    let ph = prop::sample::select(vec!["\"X\"", "\"i\"", "\"I\"", "\"M\"", "\"B\"", "\"\""])
        .prop_map(str::to_string)
        .boxed();
    let cat = prop::sample::select(vec![
        "\"task\"",
        "\"park\"",
        "\"steal\"",
        "\"inject\"",
        "\"?\"",
    ])
    .prop_map(str::to_string)
    .boxed();
    (
        field("name", any(string().boxed())),
        field("cat", any(cat)),
        if typed {
            any(ph).prop_map(|v| Some(format!("\"ph\":{v}"))).boxed()
        } else {
            field("ph", any(ph)).boxed()
        },
        field(
            "pid",
            if typed {
                number().boxed()
            } else {
                any_number().boxed()
            },
        ),
        field("tid", any(tid().boxed())),
        field("ts", any(time(true))),
        field("dur", any(time(false))),
        field("args", args(typed)),
    )
        .prop_map(|(a, b, c, d, e, f, g, h)| object([a, b, c, d, e, f, g, h]))
}

/// A whole trace as JSON text. Mostly events the timeline draws, with accepted times (so
/// that the drawing gets exercised), else with absurd ones, else events of any shape; and
/// now and then a trace cut short.
fn trace() -> impl Strategy<Value = String> {
    let events = |event: BoxedStrategy<String>| {
        prop_oneof![
            12 => prop::collection::vec(event, 0..24)
                .prop_map(|e| format!("\"traceEvents\":[{}]", e.join(",\n"))),
            1 => wrong_type().prop_map(|v| format!("\"traceEvents\":{v}")),
            1 => Just(String::new()),
        ]
    };
    let other = prop_oneof![
        2 => Just(String::new()),
        1 => prop_oneof![number(), string(), wrong_type()]
            .prop_map(|v| format!(",\"otherData\":{{\"events_lost\":{v}}}")),
        1 => wrong_type().prop_map(|v| format!(",\"otherData\":{v}")),
    ];
    let whole = move |event: BoxedStrategy<String>| {
        (events(event), other.clone())
            .prop_map(|(events, other)| format!("{{{events}{other},\"displayTimeUnit\":\"ns\"}}"))
    };
    let cut = (prop::collection::vec(drawn_event(false), 1..8), 0.0..1.0f64).prop_map(|(e, at)| {
        let text = format!("{{\"traceEvents\":[{}]}}", e.join(","));
        let mut cut = (text.len() as f64 * at) as usize;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text[..cut].to_string()
    });
    let mixed = prop_oneof![4 => drawn_event(false), 1 => any_event(true)].boxed();
    prop_oneof![
        5 => whole(mixed),
        2 => whole(drawn_event(true).boxed()),
        2 => whole(any_event(false).boxed()),
        1 => cut,
    ]
}

/// The drawing of `timeline`, checked: well-formed XML, an `<svg>` root, every rectangle
/// inside the page, and no bigger than the input allows.
fn check_drawing(timeline: &Timeline, json: &str, width: usize, title: &str) {
    let svg = timeline.render(width, title);
    // A fixed part (header, axis, legend); per event at most two lanes (label, tooltip, a
    // rectangle) and four more rectangles, or a tick, or an arrow; and the names and the
    // title, each character escaped into at most six bytes (`&apos;` for a one-byte `'`), a
    // name twice (label and tooltip).
    let bound = (16 << 10) + 1024 * timeline.counts.total + 12 * json.len() + 6 * title.len();
    assert!(svg.len() <= bound, "{} bytes > {bound}", svg.len());
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}:\n{svg}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let page: f64 = root.attribute("width").unwrap().parse().unwrap();
    for rect in doc.descendants().filter(|n| n.has_tag_name("rect")) {
        let number = |name| -> f64 { rect.attribute(name).unwrap().parse().unwrap() };
        let (x, w) = (number("x"), number("width"));
        assert!(
            x >= 0.0 && w >= 0.0 && x + w <= page,
            "{x} + {w} on a page of {page}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..ProptestConfig::with_cases(1536)
    })]

    #[test]
    fn any_trace_parses_to_an_error_or_a_well_formed_drawing(
        json in trace(),
        width in prop_oneof![4 => 100usize..2000, 1 => Just(20_000usize)],
        title in prop::collection::vec(nasty_char(), 0..24).prop_map(String::from_iter),
    ) {
        match Timeline::parse(&json) {
            Err(err) => {
                let message = err.to_string();
                prop_assert!(!message.is_empty());
                prop_assert!(message.len() < 400, "{message}");
                prop_assert!(!message.contains(|c: char| c.is_control()), "{message:?}");
            }
            Ok(timeline) => {
                prop_assert!(timeline.duration_us().is_finite());
                prop_assert!(timeline.workers() <= 2 * timeline.counts.total);
                check_drawing(&timeline, &json, width, &title);
            }
        }
    }
}
