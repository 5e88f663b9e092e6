//! The writer against prost's encoding of the same messages
//! (messages.rs, the encoder it replaced): random families, byte for byte.

use super::{encode, messages};
use crate::export::encode::random::{Rng, families};

#[test]
fn every_family_is_written_as_prost_writes_its_messages() {
    let mut rng = Rng(0x5eed_cafe_f00d_0002);
    for round in 0..2_000 {
        let seed = rng.next();
        let ours = encode(families(&mut Rng(seed)));
        let theirs = messages::encode(families(&mut Rng(seed)));
        assert!(
            ours == theirs,
            "round {round}, seed {seed:#x}: bodies differ"
        );
    }
}
