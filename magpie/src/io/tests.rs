//! The I/O driver against the OS: real sockets (a std client, its accepted peer registered with
//! the driver as a mio `TcpStream`), real `epoll`/`kqueue` turns.

use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use mio::Interest;

use super::driver::{Driver, Handle, Registration};
use super::readiness::{self, Direction, Readiness};
use super::slab;

/// Counts its wakes.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Relaxed);
    }
}

impl CountingWaker {
    fn wakes(&self) -> usize {
        self.0.load(Relaxed)
    }
}

/// A connected pair: the client end (std, blocking) and the accepted end as a non-blocking
/// mio stream, ready to register.
pub(super) fn pair() -> (std::net::TcpStream, mio::net::TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    (client, mio::net::TcpStream::from_std(server))
}

/// Turns until `done` holds (at most 5 s), returning the events delivered meanwhile.
fn turn_until(driver: &mut Driver, mut done: impl FnMut() -> bool) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut delivered = 0;
    while !done() {
        assert!(Instant::now() < deadline, "no event within 5 s");
        delivered += driver
            .turn_and_wake(Some(Duration::from_millis(10)))
            .unwrap();
    }
    delivered
}

/// Polls `registration` for reading with `waker`.
fn poll_read(
    registration: &Registration,
    waker: &Arc<CountingWaker>,
) -> Poll<std::io::Result<readiness::ReadyEvent>> {
    let waker = Waker::from(waker.clone());
    registration.poll_ready(Direction::Read, &mut Context::from_waker(&waker))
}

/// Reads until `WouldBlock`; returns the bytes read.
fn drain(stream: &mut mio::net::TcpStream) -> usize {
    let mut buf = [0u8; 64];
    let mut total = 0;
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return total,
            Ok(n) => total += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return total,
            Err(e) => panic!("read failed: {e}"),
        }
    }
}

fn driver() -> (Driver, Handle) {
    Driver::new().expect("a mio::Poll")
}

#[test]
fn readable_after_the_peer_writes_wakes_the_waiter_exactly_once() {
    let (mut driver, handle) = driver();
    let (mut client, mut server) = pair();
    let registration = handle.register(&mut server, Interest::READABLE).unwrap();
    let waker = Arc::new(CountingWaker::default());

    // Registered before any event: pending, waker stored.
    assert_eq!(driver.turn_and_wake(Some(Duration::ZERO)).unwrap(), 0);
    assert!(poll_read(&registration, &waker).is_pending());

    client.write_all(b"hello").unwrap();
    let delivered = turn_until(&mut driver, || waker.wakes() > 0);
    assert_eq!(delivered, 1);
    let Poll::Ready(Ok(event)) = poll_read(&registration, &waker) else {
        panic!("readable after the wake");
    };
    assert!(event.ready.is_readable());
    assert_eq!(event.tick, driver.tick());

    // More turns, no new edge: no second wake.
    for _ in 0..3 {
        assert_eq!(
            driver
                .turn_and_wake(Some(Duration::from_millis(5)))
                .unwrap(),
            0
        );
    }
    assert_eq!(waker.wakes(), 1, "woken exactly once");
    assert_eq!(drain(&mut server), 5);
    handle.deregister(&mut server, registration).unwrap();
    assert_eq!(handle.live(), 0);
}

#[test]
fn a_clear_with_a_stale_tick_keeps_newer_readiness() {
    let (mut driver, handle) = driver();
    let (mut client, mut server) = pair();
    let registration = handle.register(&mut server, Interest::READABLE).unwrap();
    let waker = Arc::new(CountingWaker::default());

    client.write_all(b"one").unwrap();
    turn_until(&mut driver, || poll_read(&registration, &waker).is_ready());
    let Poll::Ready(Ok(seen)) = poll_read(&registration, &waker) else {
        unreachable!()
    };
    assert_eq!(drain(&mut server), 3);

    // Between the read's WouldBlock and the clear, the peer writes and a turn delivers it.
    client.write_all(b"two").unwrap();
    turn_until(&mut driver, || driver_tick_moved(&registration, seen.tick));
    assert!(
        !registration.clear_readiness(seen),
        "a clear from an older tick must not clear"
    );
    let Poll::Ready(Ok(now)) = poll_read(&registration, &waker) else {
        panic!("the newer readiness was lost");
    };
    assert!(now.ready.is_readable());
    assert_ne!(now.tick, seen.tick);
    assert_eq!(drain(&mut server), 3);

    // The clear with the current tick does clear.
    assert!(registration.clear_readiness(now));
    assert!(poll_read(&registration, &waker).is_pending());
    handle.deregister(&mut server, registration).unwrap();
}

/// Whether readiness newer than `tick` has arrived.
fn driver_tick_moved(registration: &Registration, tick: u32) -> bool {
    let waker = Arc::new(CountingWaker::default());
    matches!(poll_read(registration, &waker), Poll::Ready(Ok(e)) if e.tick != tick)
}

#[test]
fn a_reused_slot_never_gets_the_old_sources_readiness() {
    let (mut driver, handle) = driver();
    let (mut old_client, mut old_server) = pair();
    let (_new_client, mut new_server) = pair();

    let old = handle
        .register(&mut old_server, Interest::READABLE)
        .unwrap();
    let old_token = old.token();
    // Dropped without deregistering: mio keeps reporting `old_server` under the old token.
    drop(old);
    let new = handle
        .register(&mut new_server, Interest::READABLE)
        .unwrap();
    let (old_index, old_generation) = slab::decode(old_token.0);
    let (new_index, new_generation) = slab::decode(new.token().0);
    assert_eq!(old_index, new_index, "the slot is reused");
    assert_ne!(old_generation, new_generation, "under a new generation");

    let waker = Arc::new(CountingWaker::default());
    assert!(poll_read(&new, &waker).is_pending());
    old_client.write_all(b"not yours").unwrap();
    // Give the OS time to report the old source; nothing may reach the new owner.
    let deadline = Instant::now() + Duration::from_millis(100);
    while Instant::now() < deadline {
        assert_eq!(
            driver
                .turn_and_wake(Some(Duration::from_millis(10)))
                .unwrap(),
            0
        );
    }
    assert_eq!(
        waker.wakes(),
        0,
        "the new owner was woken for the old source"
    );
    assert!(poll_read(&new, &waker).is_pending());
    handle.deregister(&mut new_server, new).unwrap();
    // Closing the old source's socket removes it from the OS's interest list.
    drop(old_server);
}

#[test]
fn a_registration_made_after_a_free_gets_the_bumped_generation() {
    let (_driver, handle) = driver();
    let (_c1, mut s1) = pair();
    let (_c2, mut s2) = pair();
    let first = handle.register(&mut s1, Interest::READABLE).unwrap();
    let second = handle.register(&mut s2, Interest::READABLE).unwrap();
    let (i1, g1) = slab::decode(first.token().0);
    let (i2, _) = slab::decode(second.token().0);
    assert_ne!(i1, i2);
    handle.deregister(&mut s1, first).unwrap();
    let again = handle.register(&mut s1, Interest::READABLE).unwrap();
    let (i3, g3) = slab::decode(again.token().0);
    assert_eq!((i3, g3), (i1, (g1 + 1) & slab::GENERATION_MASK));
    assert_eq!(handle.live(), 2);
}

#[test]
fn unpark_from_another_thread_ends_a_blocking_turn() {
    let (mut driver, handle) = driver();
    let start = Instant::now();
    let unparker = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        handle.unpark().unwrap();
    });
    assert_eq!(
        driver.turn_and_wake(None).unwrap(),
        0,
        "the waker's event is not a delivery"
    );
    assert!(start.elapsed() >= Duration::from_millis(40));
    unparker.join().unwrap();
    // An unpark before the turn ends the next turn at once.
    let (mut driver, handle) = self::driver();
    handle.unpark().unwrap();
    assert_eq!(driver.turn_and_wake(None).unwrap(), 0);
}

#[test]
fn shutdown_fails_pending_and_later_polls_and_registrations() {
    let (mut driver, handle) = driver();
    let (_client, mut server) = pair();
    let registration = handle.register(&mut server, Interest::READABLE).unwrap();
    let reader = Arc::new(CountingWaker::default());
    assert!(poll_read(&registration, &reader).is_pending());
    let writer = Arc::new(CountingWaker::default());
    {
        let waker = Waker::from(writer.clone());
        // The accepted socket is writable, but no turn reported it: pending.
        assert!(registration
            .poll_ready(Direction::Write, &mut Context::from_waker(&waker))
            .is_pending());
    }

    assert_eq!(handle.shutdown(), 2, "both waiters woken");
    assert_eq!((reader.wakes(), writer.wakes()), (1, 1));
    for _ in 0..2 {
        match poll_read(&registration, &reader) {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), ErrorKind::Other),
            other => panic!("a poll after shutdown must fail: {other:?}"),
        }
    }
    // Turns deliver nothing more; registrations are refused.
    let (_c2, mut s2) = pair();
    assert!(handle.register(&mut s2, Interest::READABLE).is_err());
    assert_eq!(
        driver
            .turn_and_wake(Some(Duration::from_millis(5)))
            .unwrap(),
        0
    );
    assert_eq!(handle.shutdown(), 0, "idempotent");
    drop(registration);
}

#[test]
fn word_fields_are_disjoint_and_tokens_round_trip() {
    let fields = [
        readiness::READINESS_MASK,
        readiness::SHUTDOWN,
        readiness::WORD_GENERATION_MASK,
        u64::MAX << readiness::TICK_SHIFT,
    ];
    for (i, a) in fields.iter().enumerate() {
        for b in &fields[i + 1..] {
            assert_eq!(a & b, 0, "{a:#x} and {b:#x} overlap");
        }
    }
    assert_eq!(Readiness::ALL.union(Readiness::EMPTY), Readiness::ALL);
    for (index, generation) in [(0, 0), (5, 1), (slab::MAX_SLOTS - 1, slab::GENERATION_MASK)] {
        assert_eq!(
            slab::decode(slab::token(index, generation)),
            (index, generation)
        );
    }
    // The driver's own token names no slot that can be allocated.
    assert!(slab::decode(usize::MAX).0 >= slab::MAX_SLOTS);
}

#[test]
fn dropping_the_driver_fails_the_waiters() {
    let (driver, handle) = driver();
    let (_client, mut server) = pair();
    let registration = handle.register(&mut server, Interest::READABLE).unwrap();
    let waker = Arc::new(CountingWaker::default());
    assert!(poll_read(&registration, &waker).is_pending());
    drop(driver);
    assert_eq!(waker.wakes(), 1);
    assert!(matches!(
        poll_read(&registration, &waker),
        Poll::Ready(Err(_))
    ));
    assert!(handle.register(&mut server, Interest::READABLE).is_err());
    handle.deregister(&mut server, registration).unwrap();
}

/// A waker that panics when woken costs its own wake: the driver's turn catches it and
/// returns normally, the readiness recorded.
#[test]
fn a_panicking_waker_is_contained() {
    struct Bomb;
    impl Wake for Bomb {
        fn wake(self: Arc<Self>) {
            panic!("waker bomb");
        }
    }
    let (mut driver, handle) = driver();
    let (mut client, mut server) = pair();
    let registration = handle.register(&mut server, Interest::READABLE).unwrap();
    let bomb = Waker::from(Arc::new(Bomb));
    assert!(registration
        .poll_ready(Direction::Read, &mut Context::from_waker(&bomb))
        .is_pending());
    client.write_all(b"x").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    // The bomb goes off inside this turn.
    while driver
        .turn_and_wake(Some(Duration::from_millis(10)))
        .unwrap()
        == 0
    {
        assert!(Instant::now() < deadline, "no event within 5 s");
    }
    let counting = Arc::new(CountingWaker::default());
    assert!(
        matches!(poll_read(&registration, &counting), Poll::Ready(Ok(e)) if e.ready.is_readable())
    );
    handle.deregister(&mut server, registration).unwrap();
}
