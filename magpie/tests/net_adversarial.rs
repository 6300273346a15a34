//! The I/O driver and `magpie::net` against adversarial safe programs: wakers that misbehave
//! when the driver wakes them (panic, panic on drop, fork-join, drop the runtime), sockets
//! waited on from another runtime or a plain thread when their runtime goes away, and one
//! half of a split stream dropped while a task waits on the other.
//!
//! Each hang turns into a failure after [`HANG`] (a `recv_timeout`); a runtime whose worker
//! is stuck is then leaked rather than dropped, so that the drop cannot hang the binary.

// `magpie::net` is not built under loom or shuttle (they model no OS).
#![cfg(all(target_os = "linux", not(any(loom, shuttle))))]

mod common;
mod net_support;

use std::future::Future;
use std::io::ErrorKind;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use common::eventually;
use magpie::net::{TcpListener, TcpStream, UnixStream};
use magpie::Runtime;
use net_support::{io_sources, NoteWaiting};

/// How long a test waits for what must happen within milliseconds. Shorter than
/// `common::DEADLINE`, so that a hang is reported in seconds; not a timing assertion.
const HANG: Duration = Duration::from_secs(10);

/// A waker that runs a closure on each wake.
struct FnWaker<F>(F);

impl<F: Fn() + Send + Sync + 'static> Wake for FnWaker<F> {
    fn wake(self: Arc<Self>) {
        (self.0)()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        (self.0)()
    }
}

fn fn_waker(f: impl Fn() + Send + Sync + 'static) -> Waker {
    Waker::from(Arc::new(FnWaker(f)))
}

/// A waker whose last drop panics, and which counts its wakes.
struct PanicOnDrop(AtomicUsize);

impl Wake for PanicOnDrop {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("a waker panicked in its drop");
    }
}

/// Runs `future` as a task of `rt` and waits for its output at most [`HANG`]. `None` if it
/// did not finish by then; the runtime is then leaked (returned as `None` too), so that
/// dropping it cannot hang the test binary.
fn run_within<T: Send + 'static>(
    rt: Runtime,
    future: impl Future<Output = T> + Send + 'static,
) -> (Option<Runtime>, Option<T>) {
    let (tx, rx) = mpsc::channel();
    let _handle = rt.spawn(async move {
        let _ = tx.send(future.await);
    });
    match rx.recv_timeout(HANG) {
        Ok(out) => (Some(rt), Some(out)),
        Err(_) => {
            std::mem::forget(rt);
            (None, None)
        }
    }
}

/// A round trip over a fresh Unix socket pair and a short timer, in a task of the current
/// runtime: its I/O driver and its timers still work.
async fn io_and_timers_work() -> bool {
    let (mut a, mut b) = UnixStream::pair().unwrap();
    a.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    b.read_exact(&mut buf).await.unwrap();
    magpie::time::sleep(Duration::from_millis(1)).await;
    &buf == b"ping"
}

/// A Unix socket pair registered with `rt`.
fn pair_on(rt: &Runtime) -> (UnixStream, UnixStream) {
    rt.block_on(async { UnixStream::pair() }).unwrap()
}

/// What a waker that forks and joins reports.
#[derive(Debug)]
enum JoinReport {
    /// It was woken on this worker (`None`: not on a worker).
    Entered(Option<usize>),
    /// Its `join` returned.
    Finished,
}

/// The driver runs a waker on the worker that holds the driver role, inside its turn, while
/// that worker counts as parked (`park_in_driver`). A waker that runs a fork-join
/// computation there (`magpie::join`, whose second half another worker steals) makes the
/// worker wait inside `join`, which parks it a second time: the latch's wake then goes to
/// the driver's `mio::Waker` (the parker is still marked `in_driver`) instead of the
/// condvar the nested park waits on, and the worker sleeps for good, holding the driver
/// role: no I/O or timer of that runtime is delivered again.
///
/// Each half is bounded (2 s), so without the bug each round ends within 4 s. The hang
/// needs the wake-up that `join` sends for its second half to reach another worker than the
/// one in the driver, and the latch to be set after the nested park began; worker 0 is kept
/// busy until another worker has likely taken the driver role, and the test runs 20 rounds
/// (in our runs, one of the first ten hung every time).
#[test]
fn a_waker_that_forks_and_joins_inside_the_driver_turn() {
    const ROUNDS: usize = 20;
    const BOUND: Duration = Duration::from_secs(2);
    for round in 0..ROUNDS {
        let rt = Arc::new(common::runtime(3));
        // Worker 0 busy: the driver role goes to worker 1 or 2 when they park.
        let release = Arc::new(AtomicBool::new(false));
        let busy = rt
            .submit_to(0, {
                let release = release.clone();
                move || {
                    while !release.load(SeqCst) {
                        std::hint::spin_loop();
                    }
                }
            })
            .unwrap();
        let (mut a, mut b) = pair_on(&rt);
        let parks_0 = rt.stats().workers[0].parks;
        release.store(true, SeqCst);
        busy.join().unwrap();
        eventually("worker 0 parks again", || {
            rt.stats().workers[0].parks > parks_0
        });
        let (report_tx, report_rx) = mpsc::channel::<JoinReport>();
        let report_tx = Mutex::new(report_tx);
        let waker = fn_waker({
            let rt = Arc::downgrade(&rt);
            move || {
                let report = |r| {
                    let _ = report_tx.lock().unwrap().send(r);
                };
                let me = magpie::current_worker_index();
                report(JoinReport::Entered(me));
                let (Some(me), Some(rt)) = (me, rt.upgrade()) else {
                    return;
                };
                let parks = |w: usize| rt.stats().workers[w].parks;
                let parks_before = parks(me);
                let stolen = AtomicBool::new(false);
                magpie::join(
                    || {
                        // Give the other workers a moment to steal the second half.
                        let start = Instant::now();
                        while !stolen.load(SeqCst) && start.elapsed() < BOUND {
                            std::hint::spin_loop();
                        }
                    },
                    || {
                        if magpie::current_worker_index() != Some(me) {
                            // Stolen: last until the joining worker has parked waiting.
                            stolen.store(true, SeqCst);
                            let start = Instant::now();
                            while parks(me) == parks_before && start.elapsed() < BOUND {
                                std::hint::spin_loop();
                            }
                        }
                    },
                );
                drop(rt);
                report(JoinReport::Finished);
            }
        });
        let mut cx = Context::from_waker(&waker);
        let mut buf = [0u8; 8];
        let mut read = pin!(a.read(&mut buf));
        assert!(read.as_mut().poll(&mut cx).is_pending());
        rt.block_on(b.write_all(b"x")).unwrap();
        let JoinReport::Entered(worker) = report_rx
            .recv_timeout(HANG)
            .expect("the driver never woke the waker")
        else {
            panic!("the waker finished before it entered");
        };
        match report_rx.recv_timeout(HANG) {
            Ok(JoinReport::Finished) => {}
            other => {
                // The worker is asleep for good: leak the runtime rather than wait for it.
                std::mem::forget(rt);
                panic!(
                    "round {round}: the `join` inside the waker (on worker {worker:?}) never \
                     returned ({other:?}): the worker holding the driver role is parked \
                     inside its own driver turn"
                );
            }
        }
        assert!(matches!(read.as_mut().poll(&mut cx), Poll::Ready(Ok(1))));
        eventually("the waker let go of the runtime", || {
            Arc::strong_count(&rt) == 1
        });
        let rt = Arc::try_unwrap(rt).ok().unwrap();
        let (rt, works) = run_within(rt, io_and_timers_work());
        assert_eq!(
            works,
            Some(true),
            "round {round}: the runtime no longer works"
        );
        drop(rt);
    }
}

/// Wakers that panic in `wake` (run by the driver on a worker, inside its turn) and in their
/// drop (when a later poll replaces them, and when the stream is dropped with one stored)
/// cost nothing but themselves: the driver goes on delivering readiness, and the read
/// completes.
#[test]
fn panicking_wakers_are_contained() {
    let rt = common::runtime(2);
    let (mut a, mut b) = pair_on(&rt);
    let wakes = Arc::new(AtomicUsize::new(0));
    let panicking = fn_waker({
        let wakes = wakes.clone();
        move || {
            wakes.fetch_add(1, SeqCst);
            panic!("a waker panicked in wake");
        }
    });
    let mut buf = [0u8; 8];
    {
        let mut read = pin!(a.read(&mut buf));
        // A waker whose drop panics is listed; the next poll's waker joins it, and the
        // readiness wakes (and so drops) both.
        poll_pending_with_a_waker_whose_drop_panics(read.as_mut());
        let mut cx = Context::from_waker(&panicking);
        assert!(read.as_mut().poll(&mut cx).is_pending());
        rt.block_on(b.write_all(b"x")).unwrap();
        eventually("the driver woke the panicking waker", || {
            wakes.load(SeqCst) == 1
        });
        assert!(matches!(read.as_mut().poll(&mut cx), Poll::Ready(Ok(1))));
    }
    // Stored when the stream is dropped: the registration drops it.
    {
        let mut read = pin!(a.read(&mut buf));
        poll_pending_with_a_waker_whose_drop_panics(read.as_mut());
    }
    drop(a);
    // And a panicking waker stored when the runtime shuts down.
    let (mut c, _d) = pair_on(&rt);
    let mut read = pin!(c.read(&mut buf));
    assert!(read
        .as_mut()
        .poll(&mut Context::from_waker(&panicking))
        .is_pending());
    let (rt, works) = run_within(rt, io_and_timers_work());
    assert_eq!(works, Some(true), "the runtime no longer works");
    drop(rt);
    assert_eq!(
        wakes.load(SeqCst),
        2,
        "the shutdown did not wake the waiter"
    );
    assert!(matches!(
        read.as_mut().poll(&mut Context::from_waker(&panicking)),
        Poll::Ready(Err(_))
    ));
}

/// A waker that drops the last handle to the runtime whose driver wakes it, so that the
/// runtime shuts down on its own worker, inside the driver's turn: nothing panics or
/// aborts, the read gets its byte or the driver's error, and a task waiting on another
/// socket of that runtime from a plain thread gets an error.
#[test]
fn a_waker_that_drops_the_runtime_inside_the_driver_turn() {
    let rt = common::runtime(2);
    let (mut a, mut b) = pair_on(&rt);
    let (mut c, _d) = pair_on(&rt);
    let holder = Arc::new(Mutex::new(None::<Runtime>));
    let (woke_tx, woke_rx) = mpsc::channel::<bool>();
    let woke_tx = Mutex::new(woke_tx);
    let waker = fn_waker({
        let holder = holder.clone();
        move || {
            let rt = holder.lock().unwrap().take();
            let dropped = rt.is_some();
            drop(rt);
            let _ = woke_tx.lock().unwrap().send(dropped);
        }
    });
    // Another waiter, on a plain thread.
    let waiting = Arc::new(AtomicBool::new(false));
    let other = std::thread::spawn({
        let waiting = waiting.clone();
        move || magpie::block_on(NoteWaiting::new(c.read(&mut [0u8; 8]), &waiting)).map(drop)
    });
    eventually("the plain thread waits", || waiting.load(SeqCst));
    let mut cx = Context::from_waker(&waker);
    let mut buf = [0u8; 8];
    let mut read = pin!(a.read(&mut buf));
    assert!(read.as_mut().poll(&mut cx).is_pending());
    *holder.lock().unwrap() = Some(rt);
    // From a plain thread: the byte goes out whether or not the runtime is still alive.
    let _ = magpie::block_on(b.write_all(b"x"));
    let dropped = woke_rx
        .recv_timeout(HANG)
        .expect("the driver never woke the waker");
    assert!(dropped, "the waker ran without the runtime");
    match read.as_mut().poll(&mut cx) {
        Poll::Ready(Ok(1)) | Poll::Ready(Err(_)) => {}
        other => panic!("unexpected {other:?}"),
    }
    let result = join_within(
        other,
        "a read waiting on a plain thread was not ended by the shutdown",
    )
    .expect("the plain thread panicked");
    assert!(result.is_err(), "a read on a shut-down driver succeeded");
}

/// A socket registered with runtime A, waited on by a task of runtime B and by a
/// `magpie::block_on` on a plain thread: reads complete while A runs (A's workers turn its
/// driver and wake B's task), and when A is dropped, both waiting reads end with an error
/// instead of waiting for good.
#[test]
fn reads_waiting_from_elsewhere_end_when_the_sockets_runtime_drops() {
    let a_rt = common::runtime(1);
    let b_rt = common::runtime(1);
    let (mut x, mut x_peer) = pair_on(&a_rt);
    let (mut y, _y_peer) = pair_on(&a_rt);

    // Works while A runs: B's task reads what a plain thread writes.
    let reader = b_rt.spawn(async move {
        let mut buf = [0u8; 3];
        x.read_exact(&mut buf).await.map(|()| (x, buf))
    });
    magpie::block_on(x_peer.write_all(b"abc")).unwrap();
    let (mut x, buf) = reader.join().unwrap().unwrap();
    assert_eq!(&buf, b"abc");

    // Waiting in B's task and on a plain thread when A goes.
    let b_waits = Arc::new(AtomicBool::new(false));
    let b_reader = b_rt.spawn(NoteWaiting::new(
        async move { x.read(&mut [0u8; 8]).await },
        &b_waits,
    ));
    let t_waits = Arc::new(AtomicBool::new(false));
    let (t_tx, t_rx) = mpsc::channel();
    std::thread::spawn({
        let t_waits = t_waits.clone();
        move || {
            let result = magpie::block_on(NoteWaiting::new(y.read(&mut [0u8; 8]), &t_waits));
            let _ = t_tx.send(result);
        }
    });
    eventually("both readers wait", || {
        b_waits.load(SeqCst) && t_waits.load(SeqCst)
    });
    drop(a_rt);
    let b_result = join_within(
        b_reader,
        "B's task still waits on a socket of a dropped runtime",
    )
    .expect("B's task failed");
    assert!(b_result.is_err(), "{b_result:?}");
    let t_result = t_rx
        .recv_timeout(HANG)
        .expect("a block_on still waits on a socket of a dropped runtime");
    assert!(t_result.is_err(), "{t_result:?}");
    drop(x_peer);
    // B is unaffected.
    let (b_rt, works) = run_within(b_rt, io_and_timers_work());
    assert_eq!(works, Some(true));
    drop(b_rt);
}

/// Dropping the owned write half while a task waits in a read on the read half leaves the
/// read waiting (the write side is shut down, not the stream) until the peer writes; and
/// dropping the read half while a task waits for room on the write half lets the writer
/// finish once the peer drains.
#[test]
fn dropping_one_half_while_the_other_waits() {
    let rt = net_support::runtime(2);
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, server) = rt.block_on(async {
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    });
    let (mut read_half, write_half) = server.into_split();
    let waits = Arc::new(AtomicBool::new(false));
    let reader = rt.spawn(NoteWaiting::new(
        async move {
            let mut buf = [0u8; 5];
            read_half.read_exact(&mut buf).await.map(|()| buf)
        },
        &waits,
    ));
    eventually("the reader waits", || waits.load(SeqCst));
    drop(write_half);
    let (mut c_read, mut c_write) = client.into_split();
    // The peer sees the write side's shutdown, then sends.
    let mut end = [0u8; 1];
    assert_eq!(rt.block_on(c_read.read(&mut end)).unwrap(), 0);
    rt.block_on(c_write.write_all(b"hello")).unwrap();
    assert_eq!(&reader.join().unwrap().unwrap(), b"hello");

    // The other way round: the writer waits for room, its read half goes away.
    let (a, b) = pair_on(&rt);
    let (a_read, mut a_write) = a.into_split();
    const TOTAL: usize = 8 << 20;
    let writer_waits = Arc::new(AtomicBool::new(false));
    let writer = rt.spawn(NoteWaiting::new(
        async move { a_write.write_all(&vec![7u8; TOTAL]).await },
        &writer_waits,
    ));
    eventually("the writer waits for room", || writer_waits.load(SeqCst));
    drop(a_read);
    let mut b = b;
    let read = rt.block_on(async move {
        let mut total = 0;
        let mut buf = vec![0u8; 1 << 16];
        while total < TOTAL {
            match b.read(&mut buf).await? {
                0 => break,
                n => total += n,
            }
        }
        Ok::<_, std::io::Error>(total)
    });
    assert_eq!(read.unwrap(), TOTAL);
    writer.join().unwrap().unwrap();
    drop(listener);
    drop(c_read);
    drop(c_write);
    assert_eq!(io_sources(&rt), 0);
}

/// Binding a TCP address in use fails, and so does connecting to a port nobody listens on
/// and to a Unix path nobody binds; a zero-byte write and read return at once.
#[test]
fn refusals_and_empty_buffers() {
    let rt = common::runtime(1);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let err = TcpListener::bind(addr).await.expect_err("bound twice");
        assert_eq!(err.kind(), ErrorKind::AddrInUse);
        drop(listener);
        let err = TcpStream::connect(addr)
            .await
            .expect_err("connected to a closed port");
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
        let (mut a, _b) = UnixStream::pair().unwrap();
        assert_eq!(a.write(&[]).await.unwrap(), 0);
        assert_eq!(a.read(&mut []).await.unwrap(), 0);
    });
    assert_eq!(io_sources(&rt), 0);
}

/// Several tasks wait on one direction of one socket at once: 40 acceptors on one listener
/// (more than a direction lists before it wakes them all, so the overflow path runs), then
/// two receivers on one UDP socket. Each acceptor gets a connection and each receiver a
/// datagram. With one waker slot per direction, the last task to poll replaced the others'
/// wakers, and those tasks waited for good, connections pending or not.
#[test]
fn many_tasks_wait_on_one_socket() {
    use magpie::net::UdpSocket;
    const ACCEPTORS: usize = 40;
    let rt = common::runtime(2);
    let listener = Arc::new(rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap());
    let addr = listener.local_addr().unwrap();
    let waiting: Vec<_> = (0..ACCEPTORS)
        .map(|_| Arc::new(AtomicBool::new(false)))
        .collect();
    let acceptors: Vec<_> = waiting
        .iter()
        .map(|waiting| {
            let listener = listener.clone();
            rt.spawn(NoteWaiting::new(
                async move { listener.accept().await.map(|(_, peer)| peer) },
                waiting,
            ))
        })
        .collect();
    eventually("every acceptor waits", || {
        waiting.iter().all(|w| w.load(SeqCst))
    });
    let clients: Vec<_> = (0..ACCEPTORS)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let guard = common::deadline::Deadline::new("the acceptors", common::DEADLINE);
    let mut peers: Vec<_> = acceptors
        .into_iter()
        .map(|acceptor| acceptor.join().unwrap().unwrap())
        .collect();
    drop(guard);
    let mut expected: Vec<_> = clients.iter().map(|c| c.local_addr().unwrap()).collect();
    peers.sort();
    expected.sort();
    assert_eq!(peers, expected, "each connection accepted once");

    let socket = Arc::new(rt.block_on(UdpSocket::bind("127.0.0.1:0")).unwrap());
    let target = socket.local_addr().unwrap();
    let waiting: Vec<_> = (0..2).map(|_| Arc::new(AtomicBool::new(false))).collect();
    let receivers: Vec<_> = waiting
        .iter()
        .map(|waiting| {
            let socket = socket.clone();
            rt.spawn(NoteWaiting::new(
                async move {
                    let mut buf = [0u8; 8];
                    let (n, _) = socket.recv_from(&mut buf).await?;
                    Ok::<u8, std::io::Error>(buf[..n][0])
                },
                waiting,
            ))
        })
        .collect();
    eventually("both receivers wait", || {
        waiting.iter().all(|w| w.load(SeqCst))
    });
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sender.send_to(&[1], target).unwrap();
    sender.send_to(&[2], target).unwrap();
    let guard = common::deadline::Deadline::new("the receivers", common::DEADLINE);
    let mut got: Vec<u8> = receivers
        .into_iter()
        .map(|receiver| receiver.join().unwrap().unwrap())
        .collect();
    drop(guard);
    got.sort();
    assert_eq!(got, [1, 2]);
}

/// Joins `handle` (a thread's or a task's, anything with a blocking `join`) from another
/// thread, failing with `what` if it has not returned within [`HANG`].
fn join_within<T: Send + 'static>(handle: impl Joinable<T>, what: &str) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(handle.join_blocking());
    });
    rx.recv_timeout(HANG).expect(what)
}

/// What [`join_within`] joins.
trait Joinable<T>: Send + 'static {
    fn join_blocking(self) -> T;
}

impl<T: Send + 'static> Joinable<std::thread::Result<T>> for std::thread::JoinHandle<T> {
    fn join_blocking(self) -> std::thread::Result<T> {
        self.join()
    }
}

impl<T: Send + 'static> Joinable<Result<T, magpie::JoinError>> for magpie::JoinHandle<T> {
    fn join_blocking(self) -> Result<T, magpie::JoinError> {
        self.join()
    }
}

/// Polls `read` once with a waker whose drop panics, expecting it to wait (the waker stays
/// with the source).
fn poll_pending_with_a_waker_whose_drop_panics<F: Future>(read: Pin<&mut F>) {
    let dropping = Waker::from(Arc::new(PanicOnDrop(AtomicUsize::new(0))));
    assert!(read.poll(&mut Context::from_waker(&dropping)).is_pending());
    drop(dropping);
}
