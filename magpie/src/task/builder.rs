//! [`Builder`]: spawning a task with a name.

use std::future::Future;

use super::raw::Origin;
use super::JoinHandle;
use crate::runtime::context;
use crate::task::closure::Closure;
use crate::Runtime;

/// Spawns a task with options: for now, a name, which [`Runtime::tasks`], the task hooks
/// ([`TaskMeta::name`](super::TaskMeta::name)) and stall reports
/// ([`StallInfo::name`](crate::StallInfo::name)) show. The shape of
/// tokio's `task::Builder`, except that spawning cannot fail, so the spawn methods return
/// the [`JoinHandle`] itself.
///
/// Naming a task costs one allocation for the name; an unnamed task pays nothing for the
/// option (a null pointer in its header).
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
/// let handle = magpie::task::Builder::new()
///     .name("db-pool")
///     .spawn_on(std::future::pending::<()>(), &rt);
/// let info = rt.tasks().into_iter().find(|t| t.id == handle.id()).unwrap();
/// assert_eq!(info.name.as_deref(), Some("db-pool"));
/// ```
#[derive(Debug, Default, Clone)]
#[must_use = "a task::Builder does nothing until one of its spawn methods is called"]
pub struct Builder {
    name: Option<String>,
}

impl Builder {
    /// A builder for an unnamed task.
    ///
    /// # Examples
    ///
    /// ```
    /// let handle = magpie::task::Builder::new().submit(|| 1 + 1);
    /// assert_eq!(handle.join().unwrap(), 2);
    /// ```
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the task.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .on_task_spawn(|meta| assert_eq!(meta.name(), Some("named")))
    ///     .build()
    ///     .unwrap();
    /// let handle = magpie::task::Builder::new().name("named").submit_on(|| (), &rt);
    /// handle.join().unwrap();
    /// ```
    pub fn name(mut self, name: &str) -> Builder {
        self.name = Some(name.to_owned());
        self
    }

    fn origin(self, location: &'static std::panic::Location<'static>) -> Origin {
        Origin {
            location,
            name: self.name,
        }
    }

    /// Spawns `future` on the current runtime, as [`magpie::spawn`](crate::spawn).
    ///
    /// # Examples
    ///
    /// ```
    /// let answer = magpie::block_on(async {
    ///     magpie::task::Builder::new().name("answer").spawn(async { 42 }).await.unwrap()
    /// });
    /// assert_eq!(answer, 42);
    /// ```
    #[track_caller]
    pub fn spawn<F>(self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let origin = self.origin(std::panic::Location::caller());
        context::with_current_registry(|registry| registry.spawn(future, origin))
    }

    /// Spawns `future` on `runtime`, as [`Runtime::spawn`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let handle = magpie::task::Builder::new().name("seven").spawn_on(async { 7 }, &rt);
    /// assert_eq!(handle.join().unwrap(), 7);
    /// ```
    #[track_caller]
    pub fn spawn_on<F>(self, future: F, runtime: &Runtime) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let origin = self.origin(std::panic::Location::caller());
        runtime.registry().spawn(future, origin)
    }

    /// Runs the closure `f` as a task on the current runtime, as [`magpie::submit`](crate::submit).
    ///
    /// # Examples
    ///
    /// ```
    /// let handle = magpie::task::Builder::new().name("sum").submit(|| (1..=4).sum::<u32>());
    /// assert_eq!(handle.join().unwrap(), 10);
    /// ```
    #[track_caller]
    pub fn submit<F, T>(self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let origin = self.origin(std::panic::Location::caller());
        context::with_current_registry(|registry| registry.spawn(Closure::new(f), origin))
    }

    /// Runs the closure `f` as a task on `runtime`, as [`Runtime::submit`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let handle = magpie::task::Builder::new().name("six").submit_on(|| 2 * 3, &rt);
    /// assert_eq!(handle.join().unwrap(), 6);
    /// ```
    #[track_caller]
    pub fn submit_on<F, T>(self, f: F, runtime: &Runtime) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let origin = self.origin(std::panic::Location::caller());
        runtime.registry().spawn(Closure::new(f), origin)
    }
}
