fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = magpie::join(|| fib(n - 1), || fib(n - 2));
    a + b
}
fn main() {
    let rt = magpie::Runtime::builder()
        .worker_threads(2)
        .build()
        .unwrap();
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let r = rt.install(|| fib(30));
        println!("fib(30)={r} in {:?}", t.elapsed());
    }
    println!("{:?}", rt.stats());
    let b = std::sync::Barrier::new(2);
    rt.install(|| magpie::join(|| b.wait(), || b.wait()));
    println!("barrier ok");
}
