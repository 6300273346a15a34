//! Running `wrk` (when it is on `PATH`) and reading its report.
//!
//! `wrk -t1 -cN -dSs --latency URL` prints, among other lines:
//!
//! ```text
//!   Latency Distribution
//!      50%  490.00us
//!      99%    1.00ms
//!   124466 requests in 1.00s, 10.44MB read
//!   Socket errors: connect 0, read 0, write 0, timeout 0
//!   Non-2xx or 3xx responses: 3
//! Requests/sec: 124318.37
//! ```
//!
//! The socket-error and non-2xx lines appear only when there are some.

use std::process::Command;
use std::time::Duration;

/// What one `wrk` run reported.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WrkReport {
    pub(crate) requests_per_sec: f64,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    /// Socket errors plus non-2xx/3xx responses.
    pub(crate) errors: u64,
}

/// Whether `wrk` can be run.
pub(crate) fn available() -> bool {
    Command::new("wrk")
        .arg("--version")
        .output()
        .is_ok_and(|o| !o.stdout.is_empty() || !o.stderr.is_empty())
}

/// Runs `wrk -t1 -c<connections> -d<secs>s --latency url`.
pub(crate) fn run(url: &str, connections: usize, secs: u64) -> Result<WrkReport, String> {
    let output = Command::new("wrk")
        .args([
            "-t1".to_owned(),
            format!("-c{connections}"),
            format!("-d{secs}s"),
            "--latency".to_owned(),
            url.to_owned(),
        ])
        .output()
        .map_err(|err| format!("could not run wrk: {err}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "wrk failed ({}): {}{}",
            output.status,
            text,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    parse(&text).ok_or_else(|| format!("could not read wrk's report:\n{text}"))
}

/// Reads a `wrk --latency` report.
pub(crate) fn parse(text: &str) -> Option<WrkReport> {
    let mut rps = None;
    let (mut p50, mut p99) = (None, None);
    let mut errors = 0;
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("Requests/sec:") {
            rps = rest.trim().parse::<f64>().ok();
        } else if let Some(rest) = line.strip_prefix("50%") {
            p50 = duration(rest.trim());
        } else if let Some(rest) = line.strip_prefix("99%") {
            p99 = duration(rest.trim());
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            errors += rest
                .split(',')
                .filter_map(|part| part.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            errors += rest.trim().parse::<u64>().unwrap_or(0);
        }
    }
    Some(WrkReport {
        requests_per_sec: rps?,
        p50: p50?,
        p99: p99?,
        errors,
    })
}

/// A wrk duration: `490.00us`, `1.00ms`, `1.20s`, `2.00m`.
fn duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let secs = match unit {
        "us" => value / 1e6,
        "ms" => value / 1e3,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return None,
    };
    Some(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_report() {
        let text = "Running 1s test @ http://127.0.0.1:1/\n  1 threads and 64 connections\n  \
                    Latency Distribution\n     50%  490.00us\n     75%  550.00us\n     \
                    99%    1.50ms\n  124466 requests in 1.00s, 10.44MB read\n  Socket \
                    errors: connect 0, read 2, write 1, timeout 0\n  Non-2xx or 3xx \
                    responses: 3\nRequests/sec: 124318.37\nTransfer/sec:     10.43MB\n";
        let report = parse(text).unwrap();
        assert_eq!(report.requests_per_sec, 124318.37);
        assert_eq!(report.p50, Duration::from_micros(490));
        assert_eq!(report.p99, Duration::from_micros(1500));
        assert_eq!(report.errors, 6);
    }
}
