//! Decisions made without a branch, for the kernel side: the BPF verifier
//! walks the two ways of each branch apart and prunes a path only where it
//! kept a state to compare with, so a run of short decisions made with
//! if/else multiplies the paths it checks (docs/architecture.md, "Before
//! you edit the hot path"). Each value goes through [`opaque`], or LLVM
//! turns the bit tricks back into comparisons, which are branches in BPF.
//!
//! The comparisons ([`above`]) take values below 2^63: the top bit of a
//! difference is its sign.

/// `x`, as a value LLVM knows nothing of (a volatile read of a local, as
/// libbpf's barrier_var()).
#[inline(always)]
pub fn opaque(x: u64) -> u64 {
    // SAFETY: reading a local.
    unsafe { core::ptr::read_volatile(&x) }
}

/// 1 when `x != 0`, 0 otherwise.
#[inline(always)]
pub fn nonzero(x: u64) -> u64 {
    (x | opaque(x.wrapping_neg())) >> 63
}

/// 1 when `a == b`, 0 otherwise.
#[inline(always)]
pub fn equal(a: u64, b: u64) -> u64 {
    1 ^ nonzero(a ^ b)
}

/// `a` when `pick` is 1, `b` when 0. The mask is opaque: LLVM knows a
/// `pick` made by a shift of the top bit is 0 or 1, and would make the
/// mask a conditional move, which BPF has not (a branch).
#[inline(always)]
pub fn select(pick: u64, a: u64, b: u64) -> u64 {
    b ^ ((a ^ b) & opaque(pick.wrapping_neg()))
}

/// 1 when `x > c`, 0 otherwise; both below 2^63.
#[inline(always)]
pub fn above(x: u64, c: u64) -> u64 {
    opaque(c.wrapping_sub(x)) >> 63
}

/// The smaller of `a` and `b`, both below 2^63.
#[inline(always)]
pub fn min(a: u64, b: u64) -> u64 {
    select(above(a, b), b, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_matches_its_branching_form() {
        let values = [0, 1, 2, 3, 7, 8, 255, 1 << 32, (1 << 62) + 5, (1 << 63) - 1];
        for a in values {
            assert_eq!(nonzero(a), u64::from(a != 0));
            for b in values {
                assert_eq!(equal(a, b), u64::from(a == b));
                assert_eq!(above(a, b), u64::from(a > b), "{a} > {b}");
                assert_eq!(min(a, b), a.min(b));
                assert_eq!(select(1, a, b), a);
                assert_eq!(select(0, a, b), b);
            }
        }
    }
}
