//! NTLMv2 responses (MS-NLMP §3.3.2) for the native SMB1 client's
//! non-extended-security logon.
//!
//! Samba 4.17's default `ntlm auth = ntlmv2-only` refuses NTLMv1 and LM;
//! NTLMv2 needs only the server's 8-byte challenge, which an NT LM 0.12
//! NEGOTIATE response carries when the client does not ask for extended
//! security, so the logon is one SESSION_SETUP_ANDX round trip with no
//! SPNEGO or NTLMSSP framing. The hashes come from RustCrypto's `md4`,
//! `md-5` and `hmac` crates; the tests hold MS-NLMP §4.2.4's vectors.

use hmac::{KeyInit, Mac};

type HmacMd5 = hmac::Hmac<md5::Md5>;

fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// HMAC-MD5 of the concatenation of `parts` under `key` (RFC 2104).
pub fn hmac_md5(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    let mut m = HmacMd5::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// The NT hash: MD4 of the UTF-16LE password (MS-NLMP NTOWFv1).
pub fn nt_hash(password: &str) -> [u8; 16] {
    use md4::Digest;
    md4::Md4::digest(utf16le(password)).into()
}

/// NTOWFv2: HMAC-MD5 under the NT hash of UPPER(user) ‖ domain, both
/// UTF-16LE.
pub fn ntowf_v2(user: &str, password: &str, domain: &str) -> [u8; 16] {
    let ud = utf16le(&(user.to_uppercase() + domain));
    hmac_md5(&nt_hash(password), &[&ud])
}

/// The two responses a SESSION_SETUP_ANDX carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Responses {
    /// LMv2 (24 bytes): the "case-insensitive password" field.
    pub lm: Vec<u8>,
    /// NTLMv2: NTProofStr ‖ the client blob, the "case-sensitive
    /// password" field.
    pub nt: Vec<u8>,
}

/// The NTLMv2 and LMv2 responses to `server_challenge`, with the client
/// challenge `client_challenge`, the time `filetime` (100 ns since 1601)
/// and the server's target information `av_pairs` (empty in
/// non-extended security: then only the MsvAvEOL terminator is sent).
pub fn responses(
    ntowf: &[u8; 16],
    server_challenge: &[u8; 8],
    client_challenge: &[u8; 8],
    filetime: u64,
    av_pairs: &[u8],
) -> Responses {
    // MS-NLMP §3.3.2: temp = Responserversion ‖ HiResponserversion ‖
    // Z(6) ‖ Time ‖ ClientChallenge ‖ Z(4) ‖ ServerName ‖ Z(4).
    let mut blob = vec![1, 1, 0, 0, 0, 0, 0, 0];
    blob.extend_from_slice(&filetime.to_le_bytes());
    blob.extend_from_slice(client_challenge);
    blob.extend_from_slice(&[0; 4]);
    if av_pairs.is_empty() {
        blob.extend_from_slice(&[0; 4]);
    } else {
        blob.extend_from_slice(av_pairs);
    }
    blob.extend_from_slice(&[0; 4]);
    let proof = hmac_md5(ntowf, &[server_challenge, &blob]);
    let mut nt = proof.to_vec();
    nt.extend_from_slice(&blob);
    let mut lm = hmac_md5(ntowf, &[server_challenge, client_challenge]).to_vec();
    lm.extend_from_slice(client_challenge);
    Responses { lm, nt }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn md4_and_hmac_md5_match_their_rfcs() {
        use md4::Digest;
        // RFC 1320 §A.5.
        assert_eq!(
            hex(&md4::Md4::digest(b"")),
            "31d6cfe0d16ae931b73c59d7e0c089c0"
        );
        assert_eq!(
            hex(&md4::Md4::digest(b"abc")),
            "a448017aaf21d8525fc10ae87aa6729d"
        );
        // RFC 2104 (and RFC 2202 test case 1).
        assert_eq!(
            hex(&hmac_md5(&[0x0b; 16], &[b"Hi There"])),
            "9294727a3638bb1c13f48ef8158bfc9d"
        );
    }

    /// MS-NLMP §4.2.1 and §4.2.4: user "User", domain "Domain", password
    /// "Password", server challenge 0123456789abcdef, client challenge
    /// aa × 8, time 0, the server's AV pairs (domain "Domain", server
    /// "Server").
    #[test]
    fn ntlmv2_matches_ms_nlmp_4_2_4() {
        assert_eq!(
            hex(&nt_hash("Password")),
            "a4f49c406510bdcab6824ee7c30fd852"
        );
        let owf = ntowf_v2("User", "Password", "Domain");
        assert_eq!(hex(&owf), "0c868a403bfd7a93a3001ef22ef02e3f");
        let av: Vec<u8> = [
            &[2u8, 0, 12, 0][..],
            &utf16le("Domain"),
            &[1, 0, 12, 0],
            &utf16le("Server"),
            &[0, 0, 0, 0],
        ]
        .concat();
        let r = responses(
            &owf,
            &[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef],
            &[0xaa; 8],
            0,
            &av,
        );
        assert_eq!(
            hex(&r.lm),
            "86c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa"
        );
        assert_eq!(hex(&r.nt[..16]), "68cd0ab851e51c96aabc927bebef6a1c");
        assert_eq!(&r.nt[16..20], &[1, 1, 0, 0]);
        assert_eq!(r.nt.len(), 16 + 28 + av.len() + 4);
    }
}
