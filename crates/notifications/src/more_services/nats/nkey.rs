//! NATS nkeys: the seed a user authenticates with (`S...`, base32 of a prefix, 32 bytes of an
//! Ed25519 seed and a CRC-16), its public key (`U...`) and its signature of the server's nonce,
//! with the words of the nkeys library the engine uses.

use base64::Engine as _;

const PREFIX_SEED: u8 = 18 << 3;
const PREFIX_CURVE: u8 = 23 << 3;
/// The public prefixes a seed may carry: operator, server, cluster, account, user, curve.
const PUBLIC_PREFIXES: [u8; 6] = [14 << 3, 13 << 3, 2 << 3, 0, 20 << 3, PREFIX_CURVE];
const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// A signing key made from a seed.
pub struct KeyPair {
    public: String,
    key: ring::signature::Ed25519KeyPair,
}

impl KeyPair {
    /// The key of `seed`, or the nkeys library's reason for refusing it.
    pub fn from_seed(seed: &str) -> Result<KeyPair, String> {
        let raw = decode(seed.as_bytes())?;
        let b1 = raw[0] & 0b1111_1000;
        let public_prefix = ((raw[0] & 0b111) << 5) | ((raw[1] & 0b1111_1000) >> 3);
        if b1 != PREFIX_SEED || !PUBLIC_PREFIXES.contains(&public_prefix) {
            return Err("nkeys: invalid seed".into());
        }
        // Curve keys encrypt; they cannot sign a nonce.
        if public_prefix == PREFIX_CURVE {
            return Err("nkeys: curve key is not valid for sign/verify".into());
        }
        let Some(seed) = raw.get(2..34) else {
            return Err("unexpected EOF".into());
        };
        let key = ring::signature::Ed25519KeyPair::from_seed_unchecked(seed)
            .map_err(|_| "nkeys: invalid seed".to_string())?;
        let public = encode(
            public_prefix,
            ring::signature::KeyPair::public_key(&key).as_ref(),
        );
        Ok(KeyPair { public, key })
    }

    /// The public key (`U...` for a user).
    pub fn public_key(&self) -> &str {
        &self.public
    }

    /// The signature of the server's nonce as CONNECT carries it (unpadded URL-safe base64).
    pub fn sign(&self, nonce: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(self.key.sign(nonce).as_ref())
    }
}

/// CRC-16/XMODEM, the checksum of encoded keys.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The bytes of an encoded key without its checksum, which must match.
fn decode(src: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(src.len() * 5 / 8);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for (i, c) in src.iter().enumerate() {
        let Some(value) = ALPHABET.iter().position(|a| a == c) else {
            return Err(format!("illegal base32 data at input byte {i}"));
        };
        buffer = (buffer << 5) | value as u32;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    if out.len() < 4 {
        return Err("nkeys: invalid encoded key".into());
    }
    let n = out.len();
    let crc = u16::from_le_bytes([out[n - 2], out[n - 1]]);
    out.truncate(n - 2);
    if crc16(&out) != crc {
        return Err("nkeys: invalid checksum".into());
    }
    Ok(out)
}

fn encode(prefix: u8, key: &[u8]) -> String {
    let mut raw = Vec::with_capacity(key.len() + 3);
    raw.push(prefix);
    raw.extend_from_slice(key);
    raw.extend_from_slice(&crc16(&raw).to_le_bytes());
    let mut out = String::with_capacity(raw.len() * 8 / 5 + 1);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for b in raw {
        buffer = (buffer << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
        buffer &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::KeyPair;

    /// Made by the nkeys library from the bytes 3, 10, 17, ...: its seed, public key, and
    /// signature of `nonce-1`.
    const SEED: &str = "SUAAGCQRDAPSMLJUHNBESUCXLZSWY432QGEI7FU5USV3FOOAY7HNLXDKKA";
    const PUBLIC: &str = "UB2VYTFZEVWKPTOEVT64NT7O3KCJAF7FXH4VCTUZDEN5M7QLBVBHMA3W";
    const SIGNATURE: &str = "573393c0b5b71da8ddfdcbdebfb3b0a1473327fd8846b927783cfce1bb03fe6b\
                             23fcaf017aed3194a30b8fb92b52b56589f77a3c7b93e867a05c019114910308";

    #[test]
    fn a_seed_gives_the_public_key_and_signature_the_nkeys_library_gives() {
        let key = KeyPair::from_seed(SEED).unwrap();
        assert_eq!(key.public_key(), PUBLIC);
        let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(key.sign(b"nonce-1"))
            .unwrap();
        let hex: String = signature.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, SIGNATURE);
    }

    #[test]
    fn bad_seeds_are_refused_in_the_libraries_words() {
        let err = |seed: &str| KeyPair::from_seed(seed).err().unwrap();
        assert_eq!(err("SUAXXX"), "nkeys: invalid encoded key");
        let mut changed = SEED.to_owned();
        changed.replace_range(10..11, "A");
        assert_eq!(err(&changed), "nkeys: invalid checksum");
        assert_eq!(err(PUBLIC), "nkeys: invalid seed");
        assert_eq!(err("not base32!"), "illegal base32 data at input byte 0");
    }
}
