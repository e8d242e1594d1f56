//! Counting the tasks, polls and wakes the tracer is expected to see.
//!
//! Every task of the workload is spawned through [`spawn_counted`], which
//! wraps its future in a [`Counted`]. The wrapper counts each poll of the
//! task, and hands the inner future a waker of its own (a "relay") that counts
//! each wake and forwards it to tokio's task waker with exactly one
//! `wake_by_ref` call. So, for the whole run:
//!
//! - `POLLS` == calls of `tokio::runtime::task::raw::poll` that polled one of
//!   our futures (one `Counted::poll` per `raw::poll`);
//! - `WAKES` == calls of tokio's `task::waker::wake_by_val` plus
//!   `task::waker::wake_by_ref` for our tasks, as long as every wake of a task
//!   reaches it through the waker the task's future was polled with (true for
//!   everything in tokio's public API: timers, channels, `Notify`, `JoinHandle`,
//!   the coop budget, `yield_now`).
//!
//! A wake keeps its kind on the way through: waking a relay by value ends in
//! one `wake_by_val` of the task's waker (on a clone, as the relay may be
//! shared), waking it by reference in one `wake_by_ref`. `WAKES_BY_VAL` counts
//! the former, so both tokio functions are exercised and can be checked.
//!
//! Each poll is also timed on the wall clock, and every one that took
//! [`LONG_POLL`] or more is kept by future type ([`long_polls`]): what the
//! tracer calls a long poll of an innocent task (one slowed down by the
//! machine it runs on) is then checked against what the program itself saw.

use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

/// Calls of [`spawn_counted`].
pub static TASKS: AtomicU64 = AtomicU64::new(0);
/// Polls of the futures of counted tasks.
pub static POLLS: AtomicU64 = AtomicU64::new(0);
/// Wakes of the wakers of counted tasks.
pub static WAKES: AtomicU64 = AtomicU64::new(0);
/// The part of `WAKES` that were wakes by value (the rest were by reference).
pub static WAKES_BY_VAL: AtomicU64 = AtomicU64::new(0);

/// Polls at least this long on the wall clock are kept in [`LONG`]: a little
/// under the tracer's default threshold (10 ms), as the tracer's poll also
/// holds tokio's own work around ours.
pub const LONG_POLL: Duration = Duration::from_millis(9);
/// Per future type (its short name): the long polls and the longest of them.
static LONG: Mutex<Vec<(&'static str, u64, Duration)>> = Mutex::new(Vec::new());

/// The long polls seen, by future type: `(name, count, longest)`.
pub fn long_polls() -> Vec<(&'static str, u64, Duration)> {
    LONG.lock().unwrap().clone()
}

fn keep_long(name: &'static str, took: Duration) {
    let mut long = LONG.lock().unwrap();
    match long.iter_mut().find(|(n, _, _)| *n == name) {
        Some(entry) => {
            entry.1 += 1;
            entry.2 = entry.2.max(took);
        }
        None => long.push((name, 1, took)),
    }
}

/// `tokio_app::workload::backend::{{closure}}` is `backend`.
fn short_name(type_name: &'static str) -> &'static str {
    let path = type_name.split("::{{closure}}").next().unwrap_or(type_name);
    path.rsplit("::").next().unwrap_or(path)
}

/// The counters, read once the runtime is gone.
pub struct Totals {
    pub tasks: u64,
    pub polls: u64,
    pub wakes: u64,
    pub wakes_by_val: u64,
}

pub fn totals() -> Totals {
    Totals {
        tasks: TASKS.load(Ordering::SeqCst),
        polls: POLLS.load(Ordering::SeqCst),
        wakes: WAKES.load(Ordering::SeqCst),
        wakes_by_val: WAKES_BY_VAL.load(Ordering::SeqCst),
    }
}

/// Spawns `fut` as a tokio task whose polls and wakes are counted.
pub fn spawn_counted<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    TASKS.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(Counted::new(fut))
}

/// A future that counts its polls and relays (and counts) its wakes.
pub struct Counted<F> {
    inner: F,
    /// The relay handed to `inner` as its waker; kept across polls and
    /// replaced only if the task's own waker changes (it does not in tokio).
    relay: Option<Arc<Relay>>,
}

impl<F> Counted<F> {
    fn new(inner: F) -> Self {
        Counted { inner, relay: None }
    }
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        POLLS.fetch_add(1, Ordering::Relaxed);
        let began = Instant::now();

        // SAFETY: `inner` is pinned structurally: it is never moved out of
        // `self`, `Counted` has no `Drop` impl, and `Counted<F>` is `Unpin`
        // only when `F` is. `relay` is not pinned and may be replaced freely.
        let this = unsafe { self.get_unchecked_mut() };

        let current = match &this.relay {
            Some(relay) if relay.task.will_wake(cx.waker()) => relay,
            _ => this.relay.insert(Arc::new(Relay {
                task: cx.waker().clone(),
            })),
        };

        // A borrowed waker over the relay: `Counted` holds a strong reference
        // for the whole poll, so this one must not be dropped (no count was
        // taken for it). Clones made by the inner future take their own.
        let waker = ManuallyDrop::new(unsafe {
            Waker::from_raw(RawWaker::new(
                Arc::as_ptr(current) as *const (),
                &RELAY_VTABLE,
            ))
        });
        let mut relay_cx = Context::from_waker(&waker);

        // SAFETY: see above, `inner` is structurally pinned.
        let inner = unsafe { Pin::new_unchecked(&mut this.inner) };
        let ready = inner.poll(&mut relay_cx);
        let took = began.elapsed();
        if took >= LONG_POLL {
            keep_long(short_name(std::any::type_name::<F>()), took);
        }
        ready
    }
}

/// What a relay waker points to: the real waker of the task.
struct Relay {
    task: Waker,
}

static RELAY_VTABLE: RawWakerVTable =
    RawWakerVTable::new(relay_clone, relay_wake, relay_wake_by_ref, relay_drop);

/// Not a wake: takes one more strong reference.
unsafe fn relay_clone(data: *const ()) -> RawWaker {
    Arc::increment_strong_count(data as *const Relay);
    RawWaker::new(data, &RELAY_VTABLE)
}

/// Wake by value: count, forward with one `wake_by_val` of the task's waker
/// (a clone of it: cloning is not a wake, and the relay may still be shared),
/// then release the reference this waker owned.
unsafe fn relay_wake(data: *const ()) {
    let relay = Arc::from_raw(data as *const Relay);
    WAKES.fetch_add(1, Ordering::Relaxed);
    WAKES_BY_VAL.fetch_add(1, Ordering::Relaxed);
    relay.task.clone().wake();
    drop(relay);
}

/// Wake by reference: count, forward with one `wake_by_ref`.
unsafe fn relay_wake_by_ref(data: *const ()) {
    let relay = &*(data as *const Relay);
    WAKES.fetch_add(1, Ordering::Relaxed);
    relay.task.wake_by_ref();
}

/// Not a wake: releases one strong reference.
unsafe fn relay_drop(data: *const ()) {
    drop(Arc::from_raw(data as *const Relay));
}
