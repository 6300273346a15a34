use std::time::{Duration, Instant};
fn main() {
    let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    let v = rt.block_on(async { magpie::spawn(async { 1 + 1 }).await.unwrap() });
    assert_eq!(v, 2);
    let t = Instant::now();
    rt.block_on(magpie::time::sleep(Duration::from_millis(20)));
    println!("slept {:?}", t.elapsed());
    let n = 100_000;
    let t = Instant::now();
    let hs: Vec<_> = (0..n).map(|i| rt.spawn(async move { i })).collect();
    let mut s = 0u64;
    for h in hs { s += h.join().unwrap(); }
    println!("{} spawned+joined in {:?}", s, t.elapsed());
    let t = Instant::now();
    let r = rt.block_on(async {
        let hs: Vec<_> = (0..200).map(|_| magpie::spawn(async { for _ in 0..1000 { magpie::task::yield_now().await; } })).collect();
        for h in hs { h.await.unwrap(); }
    });
    println!("yield_many {:?} {:?}", r, t.elapsed());
    let h = rt.spawn(std::future::pending::<()>());
    println!("{:?}", rt.stats());
    drop(rt);
    println!("pending after drop: {:?}", h.join());
}
