//! A stable content hash (64-bit FNV-1a over canonical JSON), for the template and applied-object
//! annotations. Stable across processes, builds and Rust versions, unlike `DefaultHasher`.

use serde::Serialize;

/// The hash of a value's JSON form (object keys sorted), as 16 hex digits.
pub fn of<T: Serialize>(value: &T) -> String {
    // serde_json's maps are sorted (no `preserve_order`), so equal values give equal text.
    let text = serde_json::to_vec(value).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn equal_values_hash_equal_and_are_pinned() {
        assert_eq!(super::of(&json!({"a": 1, "b": [2]})), super::of(&json!({"b": [2], "a": 1})));
        assert_ne!(super::of(&json!({"a": 1})), super::of(&json!({"a": 2})));
        // Pinned: a change of the algorithm would roll a new revision of every InferenceService.
        assert_eq!(super::of(&json!({"a": 1})), "9c3e82dd6fcae8b1");
    }
}
