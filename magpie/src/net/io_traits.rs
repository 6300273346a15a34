//! The ecosystem's I/O traits for the streams and their halves, behind features:
//! `tokio-io` (`tokio::io::AsyncRead`/`AsyncWrite`, from tokio built without its runtime)
//! and `futures-io` (`futures_io::AsyncRead`/`AsyncWrite`). Read halves get the read trait,
//! write halves the write trait, streams both.
//!
//! Every method is the inherent `poll_*` of the same name: the same readiness loop and the
//! same budget (`io/poll_evented.rs`). `poll_flush` does nothing (a socket has no user-space
//! buffer); `poll_shutdown` (tokio) and `poll_close` (futures) shut the write side down.

#[cfg(feature = "tokio-io")]
mod tokio_io {
    use std::io;
    use std::pin::Pin;
    use std::task::{ready, Context, Poll};

    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

    use crate::net::split::sealed::Stream;
    use crate::net::split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, WriteHalf};
    use crate::net::TcpStream;

    /// A read into the unfilled part of `buf`. The part is zeroed the first time (tokio's
    /// `initialize_unfilled` remembers how much is initialized), so no `unsafe` is needed to
    /// hand it to `read`.
    fn poll_read_buf<S: Stream>(
        stream: &S,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = ready!(stream.poll_read_priv(cx, buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }

    macro_rules! async_read {
        ($([$($generics:tt)*] $ty:ty => |$this:ident| $stream:expr;)*) => {$(
            impl<$($generics)*> AsyncRead for $ty {
                fn poll_read(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &mut ReadBuf<'_>,
                ) -> Poll<io::Result<()>> {
                    let $this = &*self;
                    poll_read_buf($stream, cx, buf)
                }
            }
        )*};
    }

    macro_rules! async_write {
        ($([$($generics:tt)*] $ty:ty => |$this:ident| $stream:expr;)*) => {$(
            impl<$($generics)*> AsyncWrite for $ty {
                fn poll_write(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &[u8],
                ) -> Poll<io::Result<usize>> {
                    let $this = &*self;
                    $stream.poll_write_priv(cx, buf)
                }

                fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    Poll::Ready(Ok(()))
                }

                fn poll_shutdown(
                    self: Pin<&mut Self>,
                    _: &mut Context<'_>,
                ) -> Poll<io::Result<()>> {
                    let $this = &*self;
                    Poll::Ready($stream.shutdown_write_priv())
                }
            }
        )*};
    }

    async_read! {
        [] TcpStream => |this| this;
        ['a, S: Stream] ReadHalf<'a, S> => |this| AsRef::<S>::as_ref(this);
        [S: Stream] OwnedReadHalf<S> => |this| AsRef::<S>::as_ref(this);
    }

    async_write! {
        [] TcpStream => |this| this;
        ['a, S: Stream] WriteHalf<'a, S> => |this| AsRef::<S>::as_ref(this);
        [S: Stream] OwnedWriteHalf<S> => |this| AsRef::<S>::as_ref(this);
    }

    #[cfg(unix)]
    async_read! {
        [] crate::net::UnixStream => |this| this;
    }

    #[cfg(unix)]
    async_write! {
        [] crate::net::UnixStream => |this| this;
    }
}

#[cfg(feature = "futures-io")]
mod futures_io_traits {
    use std::io;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use futures_io::{AsyncRead, AsyncWrite};

    use crate::net::split::sealed::Stream;
    use crate::net::split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, WriteHalf};
    use crate::net::TcpStream;

    macro_rules! async_read {
        ($([$($generics:tt)*] $ty:ty => |$this:ident| $stream:expr;)*) => {$(
            impl<$($generics)*> AsyncRead for $ty {
                fn poll_read(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &mut [u8],
                ) -> Poll<io::Result<usize>> {
                    let $this = &*self;
                    $stream.poll_read_priv(cx, buf)
                }
            }
        )*};
    }

    macro_rules! async_write {
        ($([$($generics:tt)*] $ty:ty => |$this:ident| $stream:expr;)*) => {$(
            impl<$($generics)*> AsyncWrite for $ty {
                fn poll_write(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &[u8],
                ) -> Poll<io::Result<usize>> {
                    let $this = &*self;
                    $stream.poll_write_priv(cx, buf)
                }

                fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    Poll::Ready(Ok(()))
                }

                fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    let $this = &*self;
                    Poll::Ready($stream.shutdown_write_priv())
                }
            }
        )*};
    }

    async_read! {
        [] TcpStream => |this| this;
        ['a, S: Stream] ReadHalf<'a, S> => |this| AsRef::<S>::as_ref(this);
        [S: Stream] OwnedReadHalf<S> => |this| AsRef::<S>::as_ref(this);
    }

    async_write! {
        [] TcpStream => |this| this;
        ['a, S: Stream] WriteHalf<'a, S> => |this| AsRef::<S>::as_ref(this);
        [S: Stream] OwnedWriteHalf<S> => |this| AsRef::<S>::as_ref(this);
    }

    #[cfg(unix)]
    async_read! {
        [] crate::net::UnixStream => |this| this;
    }

    #[cfg(unix)]
    async_write! {
        [] crate::net::UnixStream => |this| this;
    }
}
