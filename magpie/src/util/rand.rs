//! `FastRand`: the per-worker pseudo-random generator used to pick steal victims.
//!
//! xorshift64+ with the shift triplet (17, 7, 16) over two 32-bit words, the generator Tokio's
//! scheduler uses (see `../shared/seeds/async-scheduler-blitz-io.md`), and Lemire's
//! multiply-shift reduction to `[0, n)` ("Fast Random Integer Generation in an Interval",
//! ACM TOMS 2019), which needs one multiplication and no division. The reduction's bias is
//! below `n / 2^32`, irrelevant for choosing among at most a few thousand workers.

/// A fast, non-cryptographic random number generator. Not shared between threads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FastRand {
    one: u32,
    two: u32,
}

impl FastRand {
    /// A generator seeded from `seed`; distinct seeds give distinct streams.
    pub(crate) fn new(seed: u64) -> FastRand {
        // splitmix64 finalizer: nearby seeds (worker 0, 1, 2, ...) give unrelated states.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let one = (z >> 32) as u32;
        let two = z as u32;
        // xorshift has one fixed point: the all-zero state.
        FastRand {
            one,
            two: if one == 0 && two == 0 { 1 } else { two },
        }
    }

    /// A generator for worker `index`, mixed with the clock so runs differ.
    pub(crate) fn for_worker(index: usize) -> FastRand {
        // loom replays each schedule and needs every run of a model to choose alike.
        if cfg!(loom) {
            return FastRand::new(index as u64);
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        FastRand::new(nanos ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// The next 32 random bits.
    #[inline]
    pub(crate) fn next_u32(&mut self) -> u32 {
        let mut s1 = self.one;
        let s0 = self.two;
        s1 ^= s1 << 17;
        s1 = s1 ^ s0 ^ (s1 >> 7) ^ (s0 >> 16);
        self.one = s0;
        self.two = s1;
        s0.wrapping_add(s1)
    }

    /// A value in `[0, n)`; `n` must be at least 1.
    #[inline]
    pub(crate) fn below(&mut self, n: u32) -> u32 {
        debug_assert!(n > 0);
        ((u64::from(self.next_u32()) * u64::from(n)) >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = FastRand::new(7);
        for n in [1u32, 2, 3, 7, 64, 1000] {
            let mut seen = vec![false; n as usize];
            for _ in 0..20 * n {
                let v = rng.below(n);
                assert!(v < n);
                seen[v as usize] = true;
            }
            assert!(
                seen.iter().all(|&s| s),
                "not every value below {n} was produced"
            );
        }
    }

    #[test]
    fn distinct_seeds_give_distinct_streams() {
        let a: Vec<u32> = (0..8)
            .scan(FastRand::new(0), |r, _| Some(r.next_u32()))
            .collect();
        let b: Vec<u32> = (0..8)
            .scan(FastRand::new(1), |r, _| Some(r.next_u32()))
            .collect();
        assert_ne!(a, b);
    }

    #[test]
    fn roughly_uniform() {
        let mut rng = FastRand::new(42);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[rng.below(4) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "skewed counts {counts:?}");
        }
    }
}
