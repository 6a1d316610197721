//! Reading snapshot bytes back: the header, the checksum and every part of the body the
//! version has, in order.

use super::body::{Body, Endings, Extension, Shapes};
use super::{FORMAT_VERSION, HEADER_BYTES, MAGIC, OLDEST_READ, filters, resources, shares};
use crate::engine::records::bad;
use crate::error::CoreResult;
use crate::repair::snapshot::Repairs;
use crate::roles::snapshot::Roles;

/// Checks the header and checksum and decodes the body (and, from version 3, its extension).
type Decoded = (
    Body,
    Extension,
    Shapes,
    Roles,
    Repairs,
    Endings,
    resources::ResourceRecords,
    shares::ShareRecords,
    (resources::GroupResourceRecords, filters::FilterRecords),
);

pub(super) fn decode(bytes: &[u8]) -> CoreResult<Decoded> {
    let header = bytes.get(..HEADER_BYTES).ok_or_else(|| {
        bad(format!(
            "{} bytes is too short for a snapshot header",
            bytes.len()
        ))
    })?;
    if &header[..8] != MAGIC {
        return Err(bad("these bytes are not a gangplace snapshot"));
    }
    let field = |range: std::ops::Range<usize>| {
        header[range]
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
    };
    let version = field(8..10);
    let readable = u64::from(OLDEST_READ)..=u64::from(FORMAT_VERSION);
    if !readable.contains(&version) || field(10..12) != 0 {
        return Err(bad(format!(
            "format version {version} is not supported (this build reads versions \
             {OLDEST_READ} to {FORMAT_VERSION})"
        )));
    }
    let body = &bytes[HEADER_BYTES..];
    if field(12..20) != body.len() as u64 {
        return Err(bad(format!(
            "the header announces {} body bytes but {} follow (truncated or padded)",
            field(12..20),
            body.len()
        )));
    }
    if field(20..24) != u64::from(crc32fast::hash(body)) {
        return Err(bad("checksum mismatch: the bytes were corrupted"));
    }
    let (decoded, rest) = postcard::take_from_bytes::<Body>(body)
        .map_err(|error| bad(format!("malformed body: {error}")))?;
    let (extension, rest) = if version >= 3 {
        postcard::take_from_bytes::<Extension>(rest)
            .map_err(|error| bad(format!("malformed extension: {error}")))?
    } else {
        (Extension::default(), rest)
    };
    let (shapes, rest) = if version >= 4 {
        postcard::take_from_bytes::<Shapes>(rest)
            .map_err(|error| bad(format!("malformed shapes: {error}")))?
    } else {
        (Shapes::default(), rest)
    };
    let (roles, rest) = if version >= 5 {
        postcard::take_from_bytes::<Roles>(rest)
            .map_err(|error| bad(format!("malformed roles: {error}")))?
    } else {
        (Roles::default(), rest)
    };
    let (repairs, rest) = if version >= 6 {
        postcard::take_from_bytes::<Repairs>(rest)
            .map_err(|error| bad(format!("malformed repair links: {error}")))?
    } else {
        (Repairs::default(), rest)
    };
    let (endings, rest) = if version >= 7 {
        postcard::take_from_bytes::<Endings>(rest)
            .map_err(|error| bad(format!("malformed ended ranks: {error}")))?
    } else {
        (Endings::default(), rest)
    };
    let (resources, rest) = if version >= 8 {
        postcard::take_from_bytes::<resources::ResourceRecords>(rest)
            .map_err(|error| bad(format!("malformed resources: {error}")))?
    } else {
        (resources::ResourceRecords::default(), rest)
    };
    let (shares, rest) = if version >= 9 {
        postcard::take_from_bytes::<shares::ShareRecords>(rest)
            .map_err(|error| bad(format!("malformed fractions: {error}")))?
    } else {
        (shares::ShareRecords::default(), rest)
    };
    let (groups, rest) = if version >= 10 {
        postcard::take_from_bytes::<resources::GroupResourceRecords>(rest)
            .map_err(|error| bad(format!("malformed group resources: {error}")))?
    } else {
        (resources::GroupResourceRecords::default(), rest)
    };
    let (filters, rest) = if version >= 11 {
        postcard::take_from_bytes::<filters::FilterRecords>(rest)
            .map_err(|error| bad(format!("malformed taints and affinity: {error}")))?
    } else {
        (filters::FilterRecords::default(), rest)
    };
    if !rest.is_empty() {
        return Err(bad("trailing bytes after the body"));
    }
    Ok((
        decoded,
        extension,
        shapes,
        roles,
        repairs,
        endings,
        resources,
        shares,
        (groups, filters),
    ))
}
