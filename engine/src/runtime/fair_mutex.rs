//! [`FairMutex`]: a lock served strictly first come, first served, so plugin instances sharing
//! one session take turns: an instance that runs back to back cannot take the session again
//! while another is waiting (a plain mutex lets the thread that just unlocked barge back in).

use std::ops::{Deref, DerefMut};

use parking_lot::{Condvar, Mutex, MutexGuard};

/// Tickets handed out and the one being served.
#[derive(Debug, Default)]
struct Tickets {
    /// The ticket the next caller takes.
    next: u64,
    /// The ticket allowed in now.
    serving: u64,
}

/// A mutex whose waiters are served in the order they asked (a ticket lock over a
/// `parking_lot` mutex and condition variable).
#[derive(Debug, Default)]
pub struct FairMutex<T> {
    tickets: Mutex<Tickets>,
    turn: Condvar,
    value: Mutex<T>,
}

impl<T> FairMutex<T> {
    /// A lock around `value`.
    pub fn new(value: T) -> Self {
        Self {
            tickets: Mutex::new(Tickets::default()),
            turn: Condvar::new(),
            value: Mutex::new(value),
        }
    }

    /// Waits for this caller's turn (after everyone who asked before) and locks. Not
    /// realtime-safe: blocks.
    pub fn lock(&self) -> FairGuard<'_, T> {
        let mut tickets = self.tickets.lock();
        let ticket = tickets.next;
        tickets.next += 1;
        while tickets.serving != ticket {
            self.turn.wait(&mut tickets);
        }
        drop(tickets);
        FairGuard {
            // Only the ticket being served gets here, so this never waits.
            value: Some(self.value.lock()),
            lock: self,
        }
    }

    /// How many callers wait for their turn (the holder not counted). For tests and
    /// diagnostics. Not realtime-safe: locks briefly.
    pub fn waiting(&self) -> u64 {
        let tickets = self.tickets.lock();
        (tickets.next - tickets.serving).saturating_sub(1)
    }
}

/// Access to a [`FairMutex`]'s value; dropping it serves the next ticket.
pub struct FairGuard<'a, T> {
    value: Option<MutexGuard<'a, T>>,
    lock: &'a FairMutex<T>,
}

impl<T> Deref for FairGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.value.as_ref().expect("held until dropped")
    }
}

impl<T> DerefMut for FairGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value.as_mut().expect("held until dropped")
    }
}

impl<T> Drop for FairGuard<'_, T> {
    fn drop(&mut self) {
        drop(self.value.take());
        self.lock.tickets.lock().serving += 1;
        self.lock.turn.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    /// Waits until `n` callers wait on `lock`.
    fn until_waiting<T>(lock: &FairMutex<T>, n: u64) {
        while lock.waiting() < n {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn waiters_are_served_in_the_order_they_asked_before_the_holder_comes_back() {
        // One instance runs back to back; two others ask while it holds the session. Each must
        // get its turn before the first one's next run, in the order they asked.
        let lock = Arc::new(FairMutex::new(Vec::<&str>::new()));
        let first = lock.lock();
        let spawn = |name: &'static str, lock: &Arc<FairMutex<Vec<&'static str>>>| {
            let lock = lock.clone();
            std::thread::spawn(move || lock.lock().push(name))
        };
        let b = spawn("b", &lock);
        until_waiting(&lock, 1);
        let c = spawn("c", &lock);
        until_waiting(&lock, 2);
        drop(first);
        // The holder comes straight back, as a worker running back to back does.
        lock.lock().push("a again");
        b.join().unwrap();
        c.join().unwrap();
        assert_eq!(*lock.lock(), ["b", "c", "a again"]);
        assert_eq!(lock.waiting(), 0);
    }

    #[test]
    fn four_instances_running_back_to_back_get_equal_shares() {
        let lock = Arc::new(FairMutex::new(Vec::<usize>::new()));
        let threads: Vec<_> = (0..4)
            .map(|instance| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        let mut log = lock.lock();
                        log.push(instance);
                        // A run: the lock is held a while.
                        std::thread::sleep(Duration::from_millis(2));
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let log = lock.lock().clone();
        assert_eq!(log.len(), 100);
        // Once all four are in the queue, service goes round: in any 12 consecutive turns of
        // the middle of the run (3 rounds; slack for a loaded machine), every instance is served.
        for window in log[20..80].windows(12) {
            for instance in 0..4 {
                assert!(
                    window.contains(&instance),
                    "{instance} starved in {window:?}"
                );
            }
        }
    }

    #[test]
    fn a_holder_that_panics_still_hands_the_lock_on() {
        let lock = Arc::new(FairMutex::new(0));
        let held = lock.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.lock();
            panic!("a failed run");
        })
        .join();
        *lock.lock() += 1;
        assert_eq!(*lock.lock(), 1);
    }
}
