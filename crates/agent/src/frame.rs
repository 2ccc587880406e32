//! Length-prefixed JSON frames.

use std::io::{self, Read, Write};

/// Largest frame accepted (16 MiB): far above any result (histograms are
/// compact), low enough that a corrupt length cannot exhaust memory.
pub const MAX_FRAME: u32 = 16 << 20;

/// Writes one frame and flushes.
pub fn write_frame<W: Write, T: serde::Serialize>(w: &mut W, msg: &T) -> io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    if body.len() > MAX_FRAME as usize {
        return Err(io::Error::other(format!(
            "message of {} bytes exceeds the {MAX_FRAME}-byte frame cap",
            body.len()
        )));
    }
    w.write_all(&(body.len() as u32).to_be_bytes())?;
    w.write_all(&body)?;
    w.flush()
}

/// Reads one frame. `Ok(None)` on a clean end of stream before a frame.
pub fn read_frame<R: Read, T: serde::de::DeserializeOwned>(r: &mut R) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len);
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes exceeds the {MAX_FRAME}-byte cap (not a benchlab peer?)"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("bad message: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_cap() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &serde_json::json!({"a": 1})).unwrap();
        let v: serde_json::Value = read_frame(&mut buf.as_slice()).unwrap().unwrap();
        assert_eq!(v["a"], 1);
        let none: Option<serde_json::Value> = read_frame(&mut [].as_slice()).unwrap();
        assert!(none.is_none());
        let huge = (MAX_FRAME + 1).to_be_bytes();
        let err = read_frame::<_, serde_json::Value>(&mut huge.as_slice()).unwrap_err();
        assert!(err.to_string().contains("cap"));
    }
}
