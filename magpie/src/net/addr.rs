//! [`ToSocketAddrs`]: what `bind`, `connect` and `send_to` accept, resolved without blocking a
//! worker.
//!
//! Addresses and IP literals (`"127.0.0.1:8080"`, `("::1", 80)`) resolve in place. A host
//! name (`"example.com:80"`) needs the system resolver, whose `getaddrinfo` blocks; it runs on
//! the blocking pool (`spawn_blocking`), so the task waits and its worker runs others
//! meanwhile, as in tokio.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Something that resolves to socket addresses, tried in order: a [`SocketAddr`], an
/// `(IpAddr, u16)`, a `"host:port"` string, a `(host, port)` pair, a slice of addresses.
/// Sealed: the implementations are magpie's, as tokio's `ToSocketAddrs` (whose list this is).
///
/// A host name is resolved on the blocking pool (module docs of `magpie::net`); literals
/// resolve in place.
///
/// # Examples
///
/// ```
/// use std::net::{Ipv4Addr, SocketAddr};
///
/// magpie::block_on(async {
///     // All of these bind to an unused port on the loopback interface.
///     let a = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
///     let b = magpie::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
///     let c = magpie::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
///     let d = magpie::net::TcpListener::bind(("localhost", 0)).await?; // a lookup
///     assert!(d.local_addr()?.ip().is_loopback());
///     # drop((a, b, c));
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// ```
pub trait ToSocketAddrs: sealed::ToSocketAddrsPriv {}

pub(crate) mod sealed {
    use std::io;
    use std::net::{SocketAddr, ToSocketAddrs as _};

    /// The hidden half of [`ToSocketAddrs`](super::ToSocketAddrs): unnameable outside magpie,
    /// so nobody else can implement the trait.
    pub trait ToSocketAddrsPriv {
        /// The addresses, or the name lookup that finds them.
        #[doc(hidden)]
        fn to_addrs(&self) -> Resolve;
    }

    /// What an address resolves to without a lookup, or the lookup to run.
    #[doc(hidden)]
    #[derive(Debug)]
    pub enum Resolve {
        Ready(io::Result<Vec<SocketAddr>>),
        /// `"host:port"`.
        Lookup(String),
        /// `(host, port)`.
        LookupPair(String, u16),
    }

    impl Resolve {
        /// Runs the lookup (on the blocking pool: `getaddrinfo` blocks).
        pub(crate) fn lookup(self) -> io::Result<Vec<SocketAddr>> {
            match self {
                Resolve::Ready(addrs) => addrs,
                Resolve::Lookup(host) => host.as_str().to_socket_addrs().map(Iterator::collect),
                Resolve::LookupPair(host, port) => (host.as_str(), port)
                    .to_socket_addrs()
                    .map(Iterator::collect),
            }
        }
    }
}

use sealed::{Resolve, ToSocketAddrsPriv};

/// Resolves `addr`: in place for literals, on the blocking pool for host names.
pub(crate) async fn resolve(addr: &(impl ToSocketAddrs + ?Sized)) -> io::Result<Vec<SocketAddr>> {
    match addr.to_addrs() {
        Resolve::Ready(addrs) => addrs,
        lookup => crate::runtime::context::current_registry()
            .spawn_blocking(move || lookup.lookup(), crate::task::raw::Origin::caller())?
            .await
            .unwrap_or_else(|e| Err(io::Error::other(format!("name lookup failed: {e}")))),
    }
}

/// Resolves `addr` and runs `op` on each address in turn until one succeeds; returns the
/// first success or the last error (`InvalidInput` if `addr` resolved to nothing).
pub(crate) async fn try_each<T, F>(
    addr: &(impl ToSocketAddrs + ?Sized),
    mut op: impl FnMut(SocketAddr) -> F,
) -> io::Result<T>
where
    F: Future<Output = io::Result<T>>,
{
    let mut last = None;
    for addr in resolve(addr).await? {
        match op(addr).await {
            Ok(done) => return Ok(done),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        )
    }))
}

/// Resolves `host` to its socket addresses, as [`std::net::ToSocketAddrs`] does, on the
/// blocking pool when it needs the system resolver (so the task waits, not its worker).
///
/// # Errors
///
/// The resolver's, for a name it cannot resolve.
///
/// # Examples
///
/// ```
/// magpie::block_on(async {
///     for addr in magpie::net::lookup_host("localhost:80").await? {
///         assert!(addr.ip().is_loopback());
///         assert_eq!(addr.port(), 80);
///     }
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// ```
pub async fn lookup_host(host: impl ToSocketAddrs) -> io::Result<impl Iterator<Item = SocketAddr>> {
    resolve(&host).await.map(Vec::into_iter)
}

fn ready(addr: impl Into<SocketAddr>) -> Resolve {
    Resolve::Ready(Ok(vec![addr.into()]))
}

macro_rules! literal {
    ($($ty:ty),*) => {$(
        impl ToSocketAddrs for $ty {}
        impl ToSocketAddrsPriv for $ty {
            fn to_addrs(&self) -> Resolve {
                ready(*self)
            }
        }
    )*};
}

literal!(
    SocketAddr,
    SocketAddrV4,
    SocketAddrV6,
    (IpAddr, u16),
    (Ipv4Addr, u16),
    (Ipv6Addr, u16)
);

impl ToSocketAddrs for [SocketAddr] {}
impl ToSocketAddrsPriv for [SocketAddr] {
    fn to_addrs(&self) -> Resolve {
        Resolve::Ready(Ok(self.to_vec()))
    }
}

impl<const N: usize> ToSocketAddrs for [SocketAddr; N] {}
impl<const N: usize> ToSocketAddrsPriv for [SocketAddr; N] {
    fn to_addrs(&self) -> Resolve {
        Resolve::Ready(Ok(self.to_vec()))
    }
}

impl ToSocketAddrs for str {}
impl ToSocketAddrsPriv for str {
    fn to_addrs(&self) -> Resolve {
        match self.parse::<SocketAddr>() {
            Ok(addr) => ready(addr),
            Err(_) => Resolve::Lookup(self.to_owned()),
        }
    }
}

impl ToSocketAddrs for String {}
impl ToSocketAddrsPriv for String {
    fn to_addrs(&self) -> Resolve {
        self.as_str().to_addrs()
    }
}

impl ToSocketAddrs for (&str, u16) {}
impl ToSocketAddrsPriv for (&str, u16) {
    fn to_addrs(&self) -> Resolve {
        let (host, port) = *self;
        match host.parse::<IpAddr>() {
            Ok(ip) => ready((ip, port)),
            Err(_) => Resolve::LookupPair(host.to_owned(), port),
        }
    }
}

impl ToSocketAddrs for (String, u16) {}
impl ToSocketAddrsPriv for (String, u16) {
    fn to_addrs(&self) -> Resolve {
        (self.0.as_str(), self.1).to_addrs()
    }
}

impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {}
impl<T: ToSocketAddrsPriv + ?Sized> ToSocketAddrsPriv for &T {
    fn to_addrs(&self) -> Resolve {
        (**self).to_addrs()
    }
}
