//! NTLMv2 (MS-NLMP §3.3.2) and its NTLMSSP messages, for the native SMB1
//! client's logon.
//!
//! Samba 4.17's defaults leave one way in for an SMB1 client: `ntlm auth
//! = ntlmv2-only` refuses NTLMv1 and LM, and `raw NTLMv2 auth = no`
//! refuses an NTLMv2 response sent without extended security (the
//! one-round-trip logon: tried, smbd answers STATUS_INVALID_PARAMETER).
//! So the client asks for extended security and logs on with NTLMSSP
//! (NEGOTIATE, CHALLENGE, AUTHENTICATE) carrying an NTLMv2 response
//! computed over the server's target information, as MS-NLMP describes.
//! The hashes come from RustCrypto's `md4`, `md-5` and `hmac` crates; the
//! tests hold MS-NLMP §4.2.4's vectors.

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

/// NTLMSSP negotiate flags (MS-NLMP §2.2.2.5) this client asks for:
/// Unicode, request target, NTLM, always sign, extended session
/// security, target information, 128- and 56-bit.
pub const NEGOTIATE_FLAGS: u32 = 0x0000_0001
    | 0x0000_0004
    | 0x0000_0200
    | 0x0000_8000
    | 0x0008_0000
    | 0x0080_0000
    | 0x2000_0000
    | 0x8000_0000;

const SIGNATURE: &[u8; 8] = b"NTLMSSP\0";

/// The NEGOTIATE_MESSAGE (no domain or workstation supplied).
pub fn negotiate_message() -> Vec<u8> {
    let mut m = SIGNATURE.to_vec();
    m.extend_from_slice(&1u32.to_le_bytes());
    m.extend_from_slice(&NEGOTIATE_FLAGS.to_le_bytes());
    m.extend_from_slice(&[0; 16]);
    m
}

/// What a CHALLENGE_MESSAGE gives the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The server's negotiate flags.
    pub flags: u32,
    /// The 8-byte server challenge.
    pub challenge: [u8; 8],
    /// The target information (AV pairs), echoed in the NTLMv2 blob.
    pub target_info: Vec<u8>,
    /// The server's MsvAvTimestamp, if it sent one.
    pub timestamp: Option<u64>,
}

/// Finds and reads the CHALLENGE_MESSAGE in `blob` (bare, or inside a
/// SPNEGO token: it starts at its signature either way).
pub fn parse_challenge(blob: &[u8]) -> Option<Challenge> {
    let at = blob.windows(8).position(|w| w == SIGNATURE)?;
    let m = &blob[at..];
    let u16at = |i: usize| Some(u16::from_le_bytes(m.get(i..i + 2)?.try_into().ok()?));
    let u32at = |i: usize| Some(u32::from_le_bytes(m.get(i..i + 4)?.try_into().ok()?));
    if u32at(8)? != 2 {
        return None;
    }
    let flags = u32at(20)?;
    let challenge: [u8; 8] = m.get(24..32)?.try_into().ok()?;
    let (len, off) = (usize::from(u16at(40)?), u32at(44)? as usize);
    let target_info = m.get(off..off + len)?.to_vec();
    // MsvAvTimestamp (7): the time the NTLMv2 blob should carry.
    let mut timestamp = None;
    let mut i = 0;
    while i + 4 <= target_info.len() {
        let id = u16::from_le_bytes([target_info[i], target_info[i + 1]]);
        let l = usize::from(u16::from_le_bytes([target_info[i + 2], target_info[i + 3]]));
        let v = target_info.get(i + 4..i + 4 + l)?;
        match id {
            0 => break,
            7 if l == 8 => timestamp = Some(u64::from_le_bytes(v.try_into().ok()?)),
            _ => {}
        }
        i += 4 + l;
    }
    Some(Challenge {
        flags,
        challenge,
        target_info,
        timestamp,
    })
}

/// The AUTHENTICATE_MESSAGE (MS-NLMP §2.2.1.3) answering `ch` for
/// `user`@`domain` with NTLMv2; no session key exchange (the client does
/// not sign), no MIC (the server asks for none: its target information
/// carries no MsvAvFlags).
pub fn authenticate_message(
    ch: &Challenge,
    user: &str,
    password: &str,
    domain: &str,
    client_challenge: &[u8; 8],
    now: u64,
) -> Vec<u8> {
    let owf = ntowf_v2(user, password, domain);
    let r = responses(
        &owf,
        &ch.challenge,
        client_challenge,
        ch.timestamp.unwrap_or(now),
        &ch.target_info,
    );
    let fields: [Vec<u8>; 5] = [
        r.lm,
        r.nt,
        utf16le(domain),
        utf16le(user),
        utf16le("BENCHLAB"),
    ];
    const HEADER: usize = 64;
    let mut m = SIGNATURE.to_vec();
    m.extend_from_slice(&3u32.to_le_bytes());
    let mut off = HEADER;
    for f in &fields {
        m.extend_from_slice(&(f.len() as u16).to_le_bytes());
        m.extend_from_slice(&(f.len() as u16).to_le_bytes());
        m.extend_from_slice(&(off as u32).to_le_bytes());
        off += f.len();
    }
    // No encrypted random session key.
    m.extend_from_slice(&[0, 0, 0, 0]);
    m.extend_from_slice(&(off as u32).to_le_bytes());
    m.extend_from_slice(&(ch.flags & NEGOTIATE_FLAGS).to_le_bytes());
    debug_assert_eq!(m.len(), HEADER);
    for f in &fields {
        m.extend_from_slice(f);
    }
    m
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

    /// A CHALLENGE_MESSAGE as Samba sends it is read back, and the
    /// AUTHENTICATE_MESSAGE's fields point at its payloads.
    #[test]
    fn ntlmssp_messages_round_trip() {
        let av: Vec<u8> = [
            &[2u8, 0, 12, 0][..],
            &utf16le("Domain"),
            &[7, 0, 8, 0],
            &42u64.to_le_bytes(),
            &[0, 0, 0, 0],
        ]
        .concat();
        let mut ch = SIGNATURE.to_vec();
        ch.extend_from_slice(&2u32.to_le_bytes());
        ch.extend_from_slice(&[0, 0, 0, 0, 56, 0, 0, 0]); // no target name
        ch.extend_from_slice(&NEGOTIATE_FLAGS.to_le_bytes());
        ch.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        ch.extend_from_slice(&[0; 8]);
        ch.extend_from_slice(&(av.len() as u16).to_le_bytes());
        ch.extend_from_slice(&(av.len() as u16).to_le_bytes());
        ch.extend_from_slice(&56u32.to_le_bytes());
        ch.extend_from_slice(&[0; 8]); // version
        ch.extend_from_slice(&av);
        // Inside a SPNEGO token: found by its signature.
        let wrapped = [&[0xa1, 0x81, 0x20, 0x30][..], &ch].concat();
        let c = parse_challenge(&wrapped).unwrap();
        assert_eq!(c.challenge, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(c.target_info, av);
        assert_eq!(c.timestamp, Some(42));
        let a = authenticate_message(&c, "User", "Password", "Domain", &[0xaa; 8], 7);
        assert_eq!(&a[..12], b"NTLMSSP\0\x03\0\0\0");
        let field = |i: usize| {
            let len = u16::from_le_bytes([a[12 + 8 * i], a[13 + 8 * i]]) as usize;
            let off = u32::from_le_bytes(a[16 + 8 * i..20 + 8 * i].try_into().unwrap()) as usize;
            &a[off..off + len]
        };
        assert_eq!(field(0).len(), 24);
        let nt = field(1);
        // The blob carries the server's timestamp and target information.
        assert_eq!(&nt[24..32], &42u64.to_le_bytes());
        assert_eq!(&nt[44..44 + av.len()], &av[..]);
        let owf = ntowf_v2("User", "Password", "Domain");
        assert_eq!(
            nt[..16],
            hmac_md5(&owf, &[&c.challenge, &nt[16..]]),
            "NTProofStr over the blob"
        );
        assert_eq!(field(2), utf16le("Domain"));
        assert_eq!(field(3), utf16le("User"));
    }
}
