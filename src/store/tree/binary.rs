//! PostgreSQL's binary form of records and arrays (`record_send`, `array_send`), read into
//! [`Datum`]s. Each field of a record carries its type's OID, so a tree of any shape is read
//! without being described first; a type this reader does not know is an error, never a guess.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// One value of a record.
#[derive(Debug, Clone, PartialEq)]
pub enum Datum {
    Null,
    Bool(bool),
    /// `smallint`, `integer` and `bigint`.
    Int(i64),
    /// `real` and `double precision`.
    Float(f64),
    /// `text`, `varchar`, `name`.
    Text(String),
    Uuid(Uuid),
    /// `timestamptz`.
    Time(DateTime<Utc>),
    /// `json` and `jsonb`, as PostgreSQL writes them.
    Json(String),
    Record(Vec<Datum>),
    Array(Vec<Datum>),
}

impl Datum {
    /// What kind of value it is, for errors (which never quote the value: it may be a
    /// payload).
    pub fn kind(&self) -> &'static str {
        match self {
            Datum::Null => "null",
            Datum::Bool(_) => "a boolean",
            Datum::Int(_) => "an integer",
            Datum::Float(_) => "a float",
            Datum::Text(_) => "text",
            Datum::Uuid(_) => "a UUID",
            Datum::Time(_) => "a timestamp",
            Datum::Json(_) => "JSON",
            Datum::Record(_) => "a record",
            Datum::Array(_) => "an array",
        }
    }
}

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01 UTC).
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;

mod oid {
    pub const BOOL: u32 = 16;
    pub const NAME: u32 = 19;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const JSON: u32 = 114;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const VARCHAR: u32 = 1043;
    pub const TIMESTAMPTZ: u32 = 1184;
    pub const RECORD: u32 = 2249;
    pub const UUID: u32 = 2950;
    pub const JSONB: u32 = 3802;
    /// The array types of the types above.
    pub const ARRAYS: [u32; 12] = [
        1000, 1003, 1016, 1005, 1007, 1009, 199, 1021, 1022, 1015, 1185, 2951,
    ];
    pub const RECORD_ARRAY: u32 = 2287;
}

/// Reads the bytes of a value from the front of a slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!("{n} bytes wanted, {} left", self.0.len()));
        }
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(taken)
    }

    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    /// A value's length and bytes (`None`: null).
    fn value(&mut self) -> Result<Option<&'a [u8]>, String> {
        match self.i32()? {
            -1 => Ok(None),
            n if n < 0 => Err(format!("a value of length {n}")),
            n => self.take(n as usize).map(Some),
        }
    }

    fn done(&self) -> Result<(), String> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(format!("{n} bytes past the value's end")),
        }
    }
}

/// A record (the whole of `bytes`): its fields.
pub fn record(bytes: &[u8]) -> Result<Vec<Datum>, String> {
    let mut reader = Reader(bytes);
    let count = reader.i32()?;
    // Each field takes 8 bytes at least: a count read off the wire reserves no more.
    let mut fields = Vec::with_capacity((count.max(0) as usize).min(reader.0.len() / 8));
    for _ in 0..count {
        let oid = reader.u32()?;
        fields.push(match reader.value()? {
            None => Datum::Null,
            Some(bytes) => datum(oid, bytes)?,
        });
    }
    reader.done()?;
    Ok(fields)
}

/// A one-dimensional array (the whole of `bytes`): its elements.
fn array(bytes: &[u8]) -> Result<Vec<Datum>, String> {
    let mut reader = Reader(bytes);
    let dimensions = reader.i32()?;
    let _has_nulls = reader.i32()?;
    let element = reader.u32()?;
    let length = match dimensions {
        0 => 0,
        1 => {
            let length = reader.i32()?;
            let _lower_bound = reader.i32()?;
            length.max(0) as usize
        }
        n => return Err(format!("an array of {n} dimensions")),
    };
    // Each element takes 4 bytes at least.
    let mut elements = Vec::with_capacity(length.min(reader.0.len() / 4));
    for _ in 0..length {
        elements.push(match reader.value()? {
            None => Datum::Null,
            Some(bytes) => datum(element, bytes)?,
        });
    }
    reader.done()?;
    Ok(elements)
}

/// A value of type `oid`.
fn datum(oid: u32, bytes: &[u8]) -> Result<Datum, String> {
    let text = |bytes: &[u8]| {
        String::from_utf8(bytes.to_vec()).map_err(|err| format!("text not UTF-8: {err}"))
    };
    let fixed = |n: usize| -> Result<&[u8], String> {
        (bytes.len() == n)
            .then_some(bytes)
            .ok_or_else(|| format!("type {oid}: {} bytes, not {n}", bytes.len()))
    };
    Ok(match oid {
        oid::BOOL => Datum::Bool(fixed(1)?[0] != 0),
        oid::INT2 => Datum::Int(i16::from_be_bytes(fixed(2)?.try_into().expect("2")).into()),
        oid::INT4 => Datum::Int(i32::from_be_bytes(fixed(4)?.try_into().expect("4")).into()),
        oid::INT8 => Datum::Int(i64::from_be_bytes(fixed(8)?.try_into().expect("8"))),
        oid::FLOAT4 => Datum::Float(f32::from_be_bytes(fixed(4)?.try_into().expect("4")).into()),
        oid::FLOAT8 => Datum::Float(f64::from_be_bytes(fixed(8)?.try_into().expect("8"))),
        oid::TEXT | oid::VARCHAR | oid::NAME => Datum::Text(text(bytes)?),
        oid::UUID => Datum::Uuid(Uuid::from_bytes(fixed(16)?.try_into().expect("16"))),
        oid::TIMESTAMPTZ => {
            let micros = i64::from_be_bytes(fixed(8)?.try_into().expect("8"));
            micros
                .checked_add(POSTGRES_EPOCH_MICROS)
                .and_then(DateTime::from_timestamp_micros)
                .map(Datum::Time)
                .ok_or_else(|| format!("a timestamp out of range ({micros} µs)"))?
        }
        oid::JSON => Datum::Json(text(bytes)?),
        oid::JSONB => match bytes.split_first() {
            Some((1, json)) => Datum::Json(text(json)?),
            _ => return Err("jsonb of an unknown version".to_owned()),
        },
        oid::RECORD => Datum::Record(record(bytes)?),
        oid::RECORD_ARRAY => Datum::Array(array(bytes)?),
        oid if oid::ARRAYS.contains(&oid) => Datum::Array(array(bytes)?),
        oid => {
            return Err(format!(
                "a value of type {oid}, which this reader does not read"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(oid: u32, value: Option<&[u8]>) -> Vec<u8> {
        let mut out = oid.to_be_bytes().to_vec();
        match value {
            None => out.extend((-1i32).to_be_bytes()),
            Some(bytes) => {
                out.extend((bytes.len() as i32).to_be_bytes());
                out.extend(bytes);
            }
        }
        out
    }

    fn record_of(fields: &[Vec<u8>]) -> Vec<u8> {
        let mut out = (fields.len() as i32).to_be_bytes().to_vec();
        fields.iter().for_each(|f| out.extend(f));
        out
    }

    fn array_of(element: u32, items: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(i32::from(!items.is_empty()).to_be_bytes());
        out.extend(0i32.to_be_bytes());
        out.extend(element.to_be_bytes());
        if !items.is_empty() {
            out.extend((items.len() as i32).to_be_bytes());
            out.extend(1i32.to_be_bytes());
        }
        for item in items {
            out.extend((item.len() as i32).to_be_bytes());
            out.extend(item);
        }
        out
    }

    #[test]
    fn reads_nested_records_and_arrays() {
        let id = Uuid::now_v7();
        let inner = record_of(&[field(oid::TEXT, Some(b"hi")), field(oid::INT4, None)]);
        let bytes = record_of(&[
            field(oid::UUID, Some(id.as_bytes())),
            field(oid::INT8, Some(&7i64.to_be_bytes())),
            field(oid::BOOL, Some(&[1])),
            field(oid::JSONB, Some(b"\x01{\"a\": 1}")),
            field(oid::TIMESTAMPTZ, Some(&0i64.to_be_bytes())),
            field(oid::RECORD_ARRAY, Some(&array_of(oid::RECORD, &[inner]))),
            field(oid::RECORD_ARRAY, Some(&array_of(oid::RECORD, &[]))),
        ]);
        let read = record(&bytes).unwrap();
        assert_eq!(
            read,
            vec![
                Datum::Uuid(id),
                Datum::Int(7),
                Datum::Bool(true),
                Datum::Json("{\"a\": 1}".to_owned()),
                Datum::Time("2000-01-01T00:00:00Z".parse().unwrap()),
                Datum::Array(vec![Datum::Record(vec![
                    Datum::Text("hi".to_owned()),
                    Datum::Null
                ])]),
                Datum::Array(vec![]),
            ]
        );
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        // A truncated value, a type it does not know, bytes past the end.
        let truncated = record_of(&[field(oid::INT8, Some(&[0, 1]))]);
        assert!(record(&truncated).is_err());
        let unknown = record_of(&[field(1700, Some(&[0, 0, 0, 0]))]);
        assert!(record(&unknown).unwrap_err().contains("1700"));
        let mut long = record_of(&[]);
        long.push(0);
        assert!(record(&long).is_err());
    }
}
