//! Loom model of the LIFO slot: the owner displacing items while a thief takes them.

use super::lifo::LifoSlot;
use crate::sync::Arc;
use crate::util::loom_support::{model, Items};

/// The owner fills the slot three times (each fill may displace the previous item, which
/// would go to its ring) and then takes what is left, while a thief takes from the slot
/// twice: every item comes out exactly once, through a displacement or a take.
#[test]
fn loom_lifo_displacement_races_steal() {
    model(None, || {
        let items = Items::new(3);
        let slot = Arc::new(LifoSlot::<usize>::new());
        let thief = {
            let slot = slot.clone();
            loom::thread::spawn(move || {
                (0..2)
                    .filter_map(|_| slot.take().map(|item| item.as_ptr() as usize))
                    .collect::<Vec<usize>>()
            })
        };
        let mut taken = Vec::new();
        for i in 0..3 {
            if let Some(displaced) = slot.replace(items.get(i)) {
                taken.push(displaced.as_ptr() as usize);
            }
        }
        taken.extend(slot.take().map(|item| item.as_ptr() as usize));
        taken.extend(thief.join().unwrap());
        items.check(&taken, true);
        assert!(slot.is_empty());
    });
}
