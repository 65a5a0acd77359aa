//! Blocks built and read back, sought and walked both ways against a model; malformed bytes
//! flagged, never a panic.

use super::*;
use crate::key::{internal_key, lookup_key, ValueKind};
use crate::sst::block_builder::BlockBuilder;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn build(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
    let mut b = BlockBuilder::new(interval);
    for (k, v) in entries {
        b.add(k, v);
    }
    let size = b.estimated_size();
    let bytes = b.finish().to_vec();
    assert_eq!(bytes.len(), size);
    Arc::new(Block::new(bytes).expect("builder output is a valid block"))
}

fn collect(block: &Arc<Block>, order: KeyOrder) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = block.iter(order);
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    assert!(!it.is_corrupt());
    out
}

/// 1000 bytewise-sorted keys with long shared prefixes, some values empty.
fn prefixed_entries() -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..1000u32)
        .map(|i| {
            let k = format!("user/{:03}/item/{:06}", i / 37, i * 7).into_bytes();
            let v = if i % 5 == 0 {
                Vec::new()
            } else {
                format!("value-{i}").into_bytes()
            };
            (k, v)
        })
        .collect()
}

/// Internal keys: several versions of each user key, newest first, plus an empty user key.
fn internal_entries() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for u in 0..200u32 {
        let user = if u == 0 {
            Vec::new()
        } else {
            format!("k{u:05}").into_bytes()
        };
        for seq in (1..=3u64).rev() {
            let kind = if seq == 2 {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let seq = seq + u64::from(u) * 10;
            out.push((internal_key(&user, seq, kind), seq.to_le_bytes().to_vec()));
        }
    }
    out.sort_by(|a, b| compare_internal(&a.0, &b.0));
    out
}

#[test]
fn empty_block_round_trips() {
    for interval in [1, 16] {
        let block = build(&[], interval);
        assert_eq!(block.data.as_slice(), &[0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(block.size(), 8);
        for order in [KeyOrder::Bytewise, KeyOrder::Internal] {
            let mut it = block.iter(order);
            assert!(!it.valid());
            it.seek_to_first();
            assert!(!it.valid() && !it.is_corrupt());
            it.seek(b"anything");
            assert!(!it.valid() && !it.is_corrupt());
            it.seek(b"");
            assert!(!it.valid() && !it.is_corrupt());
        }
    }
}

#[test]
fn single_entry_with_empty_key_and_value() {
    for (k, v) in [
        (&b""[..], &b""[..]),
        (b"key", b""),
        (b"", b"value"),
        (b"k", b"v"),
    ] {
        let entries = vec![(k.to_vec(), v.to_vec())];
        let block = build(&entries, 16);
        assert_eq!(collect(&block, KeyOrder::Bytewise), entries);
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek(b"");
        assert!(it.valid());
        assert_eq!((it.key(), it.value()), (k, v));
        it.seek(k);
        assert!(it.valid());
        assert_eq!(it.key(), k);
        let mut after = k.to_vec();
        after.push(0);
        it.seek(&after);
        assert!(!it.valid() && !it.is_corrupt());
    }
}

#[test]
fn many_entries_round_trip_at_every_interval() {
    let entries = prefixed_entries();
    for interval in [1, 2, 16, 1000, 5000] {
        let block = build(&entries, interval);
        assert_eq!(
            collect(&block, KeyOrder::Bytewise),
            entries,
            "interval {interval}"
        );
    }
    // Prefix compression is doing its job.
    let raw: usize = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
    assert!(build(&entries, 16).size() < raw);
}

#[test]
fn internal_keys_round_trip_and_seek() {
    let entries = internal_entries();
    for interval in [1, 16] {
        let block = build(&entries, interval);
        assert_eq!(collect(&block, KeyOrder::Internal), entries);
        let mut it = block.iter(KeyOrder::Internal);
        for (i, (k, v)) in entries.iter().enumerate() {
            it.seek(k);
            assert!(it.valid(), "entry {i}");
            assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
        }
        // A lookup key at a snapshot lands on the newest version visible to it.
        for u in 1..200u32 {
            let user = format!("k{u:05}").into_bytes();
            let base = u64::from(u) * 10;
            for (snapshot, want_seq) in [
                (base + 3, base + 3),
                (base + 2, base + 2),
                (base + 1, base + 1),
            ] {
                it.seek(&lookup_key(&user, snapshot));
                assert!(it.valid());
                let p = crate::key::parse_internal_key(it.key()).unwrap();
                assert_eq!((p.user_key, p.seq), (&user[..], want_seq));
            }
            // Newer than everything stored for this key: still the newest version.
            it.seek(&lookup_key(&user, base + 9));
            assert_eq!(
                crate::key::parse_internal_key(it.key()).unwrap().seq,
                base + 3
            );
            // Older than every version: moves on to the next user key (or the end).
            it.seek(&lookup_key(&user, base));
            if u < 199 {
                let next = format!("k{:05}", u + 1).into_bytes();
                assert_eq!(crate::key::user_key(it.key()), &next[..]);
            } else {
                assert!(!it.valid() && !it.is_corrupt());
            }
        }
    }
}

#[test]
fn seek_to_every_key_between_keys_and_past_the_ends() {
    let entries = prefixed_entries();
    for interval in [1, 16] {
        let block = build(&entries, interval);
        let mut it = block.iter(KeyOrder::Bytewise);
        for (i, (k, v)) in entries.iter().enumerate() {
            it.seek(k);
            assert!(it.valid());
            assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
            // Just after this key (k + 0x00) lands on the next key.
            let mut between = k.clone();
            between.push(0);
            it.seek(&between);
            match entries.get(i + 1) {
                Some((next, _)) => assert_eq!(it.key(), &next[..]),
                None => assert!(!it.valid() && !it.is_corrupt()),
            }
            // Iterating on from a seek continues in order.
            it.seek(k);
            it.next();
            match entries.get(i + 1) {
                Some((next, _)) => assert_eq!(it.key(), &next[..]),
                None => assert!(!it.valid()),
            }
        }
        it.seek(b"");
        assert_eq!(it.key(), &entries[0].0[..]);
        it.seek(b"a");
        assert_eq!(it.key(), &entries[0].0[..]);
        it.seek(b"zzz");
        assert!(!it.valid() && !it.is_corrupt());
        // After running off the end, seek_to_first starts over.
        it.seek_to_first();
        assert_eq!(it.key(), &entries[0].0[..]);
    }
}

#[test]
fn seek_matches_a_linear_model_on_random_keys() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut keys: Vec<Vec<u8>> = (0..500)
        .map(|_| {
            let n = rng.gen_range(0..6);
            (0..n).map(|_| rng.gen_range(b'a'..=b'd')).collect()
        })
        .collect();
    keys.sort();
    keys.dedup();
    let entries: Vec<_> = keys.iter().map(|k| (k.clone(), k.repeat(2))).collect();
    for interval in [1, 3, 16] {
        let block = build(&entries, interval);
        let mut it = block.iter(KeyOrder::Bytewise);
        for _ in 0..2000 {
            let n = rng.gen_range(0..7);
            let target: Vec<u8> = (0..n).map(|_| rng.gen_range(b'a'..=b'e')).collect();
            it.seek(&target);
            match entries.iter().find(|(k, _)| k >= &target) {
                Some((k, v)) => assert_eq!((it.key(), it.value()), (&k[..], &v[..])),
                None => assert!(!it.valid()),
            }
        }
    }
}

#[test]
fn seek_and_next_reuse_the_key_buffer() {
    let entries = prefixed_entries();
    let block = build(&entries, 16);
    let mut it = block.iter(KeyOrder::Bytewise);
    // Warm up: every key has the same length here, so one visit sizes the buffer.
    it.seek_to_first();
    let (ptr, cap) = (it.key.as_ptr(), it.key.capacity());
    for (k, _) in entries.iter().step_by(7) {
        it.seek(k);
        it.next();
        assert_eq!((it.key.as_ptr(), it.key.capacity()), (ptr, cap));
    }
}

#[test]
fn malformed_restart_arrays_are_rejected() {
    assert!(Block::new(Vec::new()).is_none());
    assert!(Block::new(vec![1, 0, 0]).is_none());
    // Zero restarts.
    assert!(Block::new(vec![0, 0, 0, 0]).is_none());
    // A count that does not fit.
    assert!(Block::new(vec![0, 0, 0, 0, 2, 0, 0, 0]).is_none());
    assert!(Block::new(vec![0xff, 0xff, 0xff, 0xff]).is_none());
    // First restart not at 0.
    assert!(Block::new(vec![9, 9, 9, 1, 0, 0, 0, 1, 0, 0, 0]).is_none());
    let entries = prefixed_entries()[..40].to_vec();
    let good = build(&entries, 4).data.as_slice().to_vec();
    let n = good.len();
    let count = fixed32_at(&good, n - 4).unwrap() as usize;
    let restarts_at = n - 4 - 4 * count;
    // Offsets that are not increasing.
    let mut bad = good.clone();
    bad[restarts_at + 8..restarts_at + 12].copy_from_slice(&good[restarts_at + 4..restarts_at + 8]);
    assert!(Block::new(bad).is_none());
    // An offset past the entry area.
    let mut bad = good.clone();
    bad[n - 8..n - 4].copy_from_slice(&(restarts_at as u32).to_le_bytes());
    assert!(Block::new(bad).is_none());
    assert!(Block::new(good).is_some());
}

#[test]
fn malformed_entries_are_flagged_not_panicked_on() {
    let entries = vec![
        (b"alpha".to_vec(), b"1".to_vec()),
        (b"alpine".to_vec(), b"2".to_vec()),
    ];
    let good = build(&entries, 16).data.as_slice().to_vec();
    // Second entry header starts at 3 + 5 + 1 = 9: claim more shared bytes than exist.
    let mut bad = good.clone();
    assert_eq!(bad[9], 3);
    bad[9] = 6;
    let block = Arc::new(Block::new(bad).unwrap());
    let mut it = block.iter(KeyOrder::Bytewise);
    it.seek_to_first();
    assert_eq!(it.key(), b"alpha");
    it.next();
    assert!(!it.valid() && it.is_corrupt());
    // Corruption is sticky.
    it.seek_to_first();
    assert!(!it.valid() && it.is_corrupt());

    // A value length past the entry area.
    let mut bad = good.clone();
    bad[2] = 100;
    let block = Arc::new(Block::new(bad).unwrap());
    let mut it = block.iter(KeyOrder::Bytewise);
    it.seek(b"alpha");
    assert!(!it.valid() && it.is_corrupt());

    // A varint that never ends.
    let mut bad = good.clone();
    bad[..3].copy_from_slice(&[0x80, 0x80, 0x80]);
    let block = Arc::new(Block::new(bad).unwrap());
    let mut it = block.iter(KeyOrder::Bytewise);
    it.seek_to_first();
    assert!(!it.valid() && it.is_corrupt());

    // A restart point with a nonzero shared length.
    let two = build(&entries, 1).data.as_slice().to_vec();
    let mut bad = two.clone();
    assert_eq!(bad[9], 0);
    bad[9] = 2;
    bad[10] -= 2;
    let block = Arc::new(Block::new(bad).unwrap());
    let mut it = block.iter(KeyOrder::Bytewise);
    it.seek_to_first();
    it.next();
    assert!(it.is_corrupt());
    let mut it = block.iter(KeyOrder::Bytewise);
    it.seek(b"alpine");
    assert!(it.is_corrupt());

    // A restart offset that points inside an entry: a scan steps over it.
    let mut bad = two;
    let n = bad.len();
    bad[n - 8] = 10;
    let block = Arc::new(Block::new(bad).unwrap());
    let mut it = block.iter(KeyOrder::Bytewise);
    it.seek_to_first();
    assert!(it.valid());
    it.next();
    // Only reaching the end shows that restart offset 10 was never an entry boundary.
    assert_eq!(it.key(), b"alpine");
    it.next();
    assert!(!it.valid() && it.is_corrupt());
    // A seek decodes the restart point itself and finds a nonzero shared length there.
    let mut it = block.iter(KeyOrder::Bytewise);
    it.seek(b"alpine");
    assert!(!it.valid() && it.is_corrupt());
}

#[test]
fn backward_walks_mirror_forward_ones_at_every_interval() {
    let entries = prefixed_entries();
    for interval in [1, 2, 3, 16, 1000] {
        let block = build(&entries, interval);
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_last();
        for (i, (k, v)) in entries.iter().enumerate().rev() {
            assert!(it.valid(), "interval {interval}, entry {i}");
            assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
            it.prev();
        }
        assert!(!it.valid() && !it.is_corrupt());
        // prev on an invalid iterator stays put; a seek starts over.
        it.prev();
        assert!(!it.valid() && !it.is_corrupt());
        // Turning around at every entry.
        for (i, (k, _)) in entries.iter().enumerate().step_by(7) {
            it.seek(k);
            it.prev();
            match i.checked_sub(1) {
                Some(p) => assert_eq!(it.key(), &entries[p].0[..]),
                None => assert!(!it.valid() && !it.is_corrupt()),
            }
            it.next();
            if i > 0 {
                assert_eq!(it.key(), &k[..]);
            }
        }
    }
}

#[test]
fn seek_for_prev_and_seek_to_last_on_empty_and_single_entry_blocks() {
    for interval in [1, 16] {
        let block = build(&[], interval);
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_last();
        assert!(!it.valid() && !it.is_corrupt());
        it.seek_for_prev(b"zzz");
        assert!(!it.valid() && !it.is_corrupt());
        let entries = vec![(b"m".to_vec(), b"v".to_vec())];
        let block = build(&entries, interval);
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_last();
        assert_eq!(it.key(), b"m");
        it.prev();
        assert!(!it.valid() && !it.is_corrupt());
        it.seek_for_prev(b"m");
        assert_eq!(it.key(), b"m");
        it.seek_for_prev(b"z");
        assert_eq!(it.key(), b"m");
        it.seek_for_prev(b"a");
        assert!(!it.valid() && !it.is_corrupt());
        it.seek_for_prev(b"");
        assert!(!it.valid() && !it.is_corrupt());
    }
}

#[test]
fn internal_keys_seek_for_prev_lands_on_the_oldest_version_at_or_before() {
    let entries = internal_entries();
    for interval in [1, 16] {
        let block = build(&entries, interval);
        let mut it = block.iter(KeyOrder::Internal);
        for (i, (k, v)) in entries.iter().enumerate() {
            it.seek_for_prev(k);
            assert_eq!((it.key(), it.value()), (&k[..], &v[..]), "entry {i}");
        }
        // The largest internal key of a user key (sequence 0, a tombstone) is ≥ each of its
        // versions: seek_for_prev to it lands on the oldest version.
        for u in 1..200u32 {
            let user = format!("k{u:05}").into_bytes();
            it.seek_for_prev(&internal_key(&user, 0, ValueKind::Deletion));
            let p = crate::key::parse_internal_key(it.key()).unwrap();
            assert_eq!((p.user_key, p.seq), (&user[..], u64::from(u) * 10 + 1));
        }
    }
}

#[test]
fn random_walks_match_a_linear_model() {
    let mut rng = StdRng::seed_from_u64(17);
    let mut keys: Vec<Vec<u8>> = (0..400)
        .map(|_| {
            let n = rng.gen_range(0..6);
            (0..n).map(|_| rng.gen_range(b'a'..=b'd')).collect()
        })
        .collect();
    keys.sort();
    keys.dedup();
    let entries: Vec<_> = keys.iter().map(|k| (k.clone(), k.repeat(3))).collect();
    let n = entries.len();
    for interval in [1, 2, 5, 16] {
        let block = build(&entries, interval);
        let mut it = block.iter(KeyOrder::Bytewise);
        for _ in 0..3000 {
            let target: Vec<u8> = (0..rng.gen_range(0..7))
                .map(|_| rng.gen_range(b'a'..=b'e'))
                .collect();
            let mut pos = match rng.gen_range(0..4) {
                0 => {
                    it.seek(&target);
                    entries.partition_point(|(k, _)| k < &target)
                }
                1 => {
                    it.seek_for_prev(&target);
                    entries
                        .partition_point(|(k, _)| k <= &target)
                        .checked_sub(1)
                        .unwrap_or(n)
                }
                2 => {
                    it.seek_to_first();
                    0
                }
                _ => {
                    it.seek_to_last();
                    n - 1
                }
            };
            for _ in 0..rng.gen_range(0..20) {
                match entries.get(pos) {
                    Some((k, v)) => assert_eq!((it.key(), it.value()), (&k[..], &v[..])),
                    None => {
                        assert!(!it.valid() && !it.is_corrupt());
                        break;
                    }
                }
                if rng.gen_bool(0.5) {
                    it.next();
                    pos += 1;
                } else {
                    it.prev();
                    pos = pos.checked_sub(1).unwrap_or(n);
                }
            }
        }
    }
}

#[test]
fn prev_flags_entries_that_straddle_a_restart_point() {
    // Restart point 1 moved inside the first entry's value: a forward scan steps over it and
    // flags it; walking back from the last entry decodes from restart point 1 and flags it
    // before returning anything invented.
    let entries = vec![
        (b"alpha".to_vec(), b"1111".to_vec()),
        (b"beta".to_vec(), b"2".to_vec()),
        (b"gamma".to_vec(), b"3".to_vec()),
    ];
    let mut bad = build(&entries, 1).data.as_slice().to_vec();
    let n = bad.len();
    // Restart array: [0, 12, 20]; the second becomes 10, inside "alpha"'s value.
    assert_eq!(fixed32_at(&bad, n - 12), Some(12));
    bad[n - 12] = 10;
    let block = Arc::new(Block::new(bad).unwrap());
    let mut it = block.iter(KeyOrder::Bytewise);
    it.seek_to_first();
    it.next();
    assert!(!it.valid() && it.is_corrupt());
    let mut it = block.iter(KeyOrder::Bytewise);
    it.seek_to_last();
    assert_eq!(it.key(), b"gamma");
    it.prev();
    // Restart point 1 (offset 10, inside a value) does not decode as an entry.
    assert!(!it.valid() && it.is_corrupt());
    // Sticky, as for every other corruption.
    it.seek_to_last();
    assert!(!it.valid() && it.is_corrupt());
    it.seek_for_prev(b"zzz");
    assert!(!it.valid() && it.is_corrupt());
}

/// Walks a possibly damaged block every way a reader would; returns the keys a full scan
/// yielded without being flagged corrupt.
fn exercise(bytes: Vec<u8>, order: KeyOrder, probes: &[Vec<u8>]) -> Option<Vec<Vec<u8>>> {
    let len = bytes.len();
    let block = Arc::new(Block::new(bytes)?);
    let mut it = block.iter(order);
    it.seek_to_first();
    let mut keys = Vec::new();
    // Every entry takes at least 3 header bytes, so a scan that terminates does so within this.
    let mut steps = 0;
    while it.valid() {
        keys.push(it.key().to_vec());
        let _ = it.value();
        it.next();
        steps += 1;
        assert!(steps <= len / 3 + 1, "iteration does not terminate");
    }
    let scan_ok = !it.is_corrupt();
    // Backward from the end: each step lands on an entry that starts before the current one,
    // so it terminates within the same bound.
    let mut it = block.iter(order);
    it.seek_to_last();
    let mut back = Vec::new();
    let mut steps = 0;
    while it.valid() {
        back.push(it.key().to_vec());
        let _ = it.value();
        it.prev();
        steps += 1;
        assert!(
            steps <= len / 3 + 1,
            "backward iteration does not terminate"
        );
    }
    if scan_ok {
        // A block a forward scan found sound reads the same backward.
        assert!(
            !it.is_corrupt(),
            "a clean block is flagged walking backward"
        );
        back.reverse();
        assert_eq!(back, keys, "backward walk differs from the forward one");
    }
    for p in probes {
        // A batch's prefetch of the entries a seek will decode reads the block as the seek
        // does, damaged or not.
        block.prefetch_seek_span(p, order);
        let mut it = block.iter(order);
        it.seek(p);
        let mut steps = 0;
        while it.valid() && steps < 4 {
            let _ = (it.key(), it.value());
            it.next();
            steps += 1;
        }
        let mut it = block.iter(order);
        it.seek_for_prev(p);
        let mut steps = 0;
        while it.valid() && steps < 4 {
            let _ = (it.key(), it.value());
            if steps % 3 == 2 {
                it.next();
            } else {
                it.prev();
            }
            steps += 1;
        }
    }
    scan_ok.then_some(keys)
}

#[test]
fn damaged_blocks_never_panic() {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let bytewise = prefixed_entries()[..200].to_vec();
    let internal = internal_entries()[..200].to_vec();
    let cases = [
        (build(&bytewise, 16), KeyOrder::Bytewise, &bytewise),
        (build(&bytewise, 1), KeyOrder::Bytewise, &bytewise),
        (build(&internal, 16), KeyOrder::Internal, &internal),
        (build(&internal, 3), KeyOrder::Internal, &internal),
    ];
    let mut accepted = 0;
    let mut clean_scans = 0;
    for (block, order, entries) in &cases {
        let good = block.data.as_slice();
        let mut probes: Vec<Vec<u8>> = entries.iter().step_by(17).map(|e| e.0.clone()).collect();
        probes.push(Vec::new());
        probes.push(vec![0xff; 30]);
        for round in 0..1500 {
            let mut bad = good.to_vec();
            match round % 4 {
                0 => {
                    let i = rng.gen_range(0..bad.len());
                    bad[i] ^= 1 << rng.gen_range(0..8);
                }
                1 => {
                    for _ in 0..rng.gen_range(1..8) {
                        let i = rng.gen_range(0..bad.len());
                        bad[i] = rng.r#gen();
                    }
                }
                2 => bad.truncate(rng.gen_range(0..bad.len())),
                _ => {
                    // Damage only the entry area, so Block::new accepts it and the iterator
                    // must cope.
                    let count = fixed32_at(&bad, bad.len() - 4).unwrap() as usize;
                    let entries_end = bad.len() - 4 - 4 * count;
                    let i = rng.gen_range(0..entries_end);
                    bad[i] = rng.r#gen();
                }
            }
            if let Some(keys) = exercise(bad, *order, &probes) {
                accepted += 1;
                clean_scans += usize::from(keys.len() == entries.len());
            }
        }
        // Pure garbage of every small size.
        for _ in 0..1000 {
            let n = rng.gen_range(0..64);
            let mut junk: Vec<u8> = (0..n).map(|_| rng.r#gen()).collect();
            if n >= 8 && rng.gen_bool(0.5) {
                // A plausible trailer makes Block::new accept more of it.
                junk[n - 4..].copy_from_slice(&1u32.to_le_bytes());
                junk[n - 8..n - 4].copy_from_slice(&0u32.to_le_bytes());
            }
            let _ = exercise(junk, *order, &probes);
        }
    }
    // The fuzzing reached the iterator, not just Block::new's rejection path.
    assert!(
        accepted > 1000 && clean_scans > 0,
        "{accepted} {clean_scans}"
    );
}

#[test]
fn truncated_entries_yield_a_stored_prefix_or_are_flagged() {
    // Cut the entry area anywhere and rebuild a valid restart array for what is left: a scan
    // must return exactly the stored keys before the cut, and flag corruption unless the cut
    // fell on an entry boundary. No invented key may appear.
    let entries = prefixed_entries()[..100].to_vec();
    let interval = 16;
    let mut b = BlockBuilder::new(interval);
    let mut boundaries = vec![0];
    for (n, (k, v)) in entries.iter().enumerate() {
        b.add(k, v);
        let restarts = (n + 1).div_ceil(interval);
        boundaries.push(b.estimated_size() - 4 * restarts - 4);
    }
    let full = b.finish().to_vec();
    let count = fixed32_at(&full, full.len() - 4).unwrap() as usize;
    let restarts_at = full.len() - 4 - 4 * count;
    assert_eq!(boundaries.last(), Some(&restarts_at));
    for cut in 0..=restarts_at {
        let mut bytes = full[..cut].to_vec();
        let kept: Vec<u32> = (0..count)
            .map(|i| fixed32_at(&full, restarts_at + 4 * i).unwrap())
            .filter(|&r| r == 0 || (r as usize) < cut)
            .collect();
        for r in &kept {
            bytes.extend_from_slice(&r.to_le_bytes());
        }
        bytes.extend_from_slice(&(kept.len() as u32).to_le_bytes());
        let block = Arc::new(Block::new(bytes).unwrap());
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_first();
        let mut i = 0;
        while it.valid() {
            assert_eq!(
                (it.key(), it.value()),
                (&entries[i].0[..], &entries[i].1[..]),
                "cut {cut}"
            );
            i += 1;
            it.next();
        }
        let whole = boundaries.iter().take_while(|&&b| b <= cut).count() - 1;
        assert_eq!(i, whole, "cut {cut}");
        assert_eq!(it.is_corrupt(), !boundaries.contains(&cut), "cut {cut}");
        // A seek past everything kept agrees with the scan.
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek(&[0xff]);
        assert!(!it.valid());
    }
}
