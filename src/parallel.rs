//! One way to spread independent work over the machine's cores: the digest builder and
//! `dream-run check` read and scan many files, and on a cold cache each waits on the disk.

/// `f` applied to every item, in order, on up to 8 scoped threads (one when there are few
/// items: a thread costs more than a small file). A worker's panic is re-raised here: it
/// is a bug, not a result.
pub fn map<'a, T: Sync, R: Send>(items: &'a [T], f: impl Fn(&'a T) -> R + Sync) -> Vec<R> {
    map_from(32, items, f)
}

/// [`map`], on one thread below `min_items` items.
pub fn map_from<'a, T: Sync, R: Send>(
    min_items: usize,
    items: &'a [T],
    f: impl Fn(&'a T) -> R + Sync,
) -> Vec<R> {
    let workers = if items.len() < min_items {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
    };
    if workers == 1 {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(workers);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<R>>()))
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for handle in handles {
            match handle.join() {
                Ok(part) => out.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_the_order_of_its_items() {
        let items: Vec<usize> = (0..1000).collect();
        assert_eq!(
            super::map(&items, |i| i * 2),
            (0..1000).map(|i| i * 2).collect::<Vec<_>>()
        );
        assert_eq!(super::map(&[1, 2, 3], |i| i + 1), vec![2, 3, 4]);
        assert!(super::map(&[] as &[u8], |i| *i).is_empty());
    }
}
