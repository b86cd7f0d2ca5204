//! InfluxDB's annotated CSV, as far as a measurement needs it: each record's `_value`, typed by
//! the table's `#datatype` annotation, and printed as Go's `fmt.Sprint` prints it.
//!
//! An answer is a run of tables, each a few `#annotation` rows, a header row and the records,
//! tables apart by a blank line; the first column of every row is the annotation's name or
//! empty. An error table (`error`, `reference` columns) ends the reading.

use expr::Value;

use super::super::outcome::go_float;

/// One table's layout.
#[derive(Default)]
struct Table {
    datatypes: Vec<String>,
    defaults: Vec<String>,
    /// Index of `_value`, once the header has been read.
    value_column: Option<usize>,
    header_read: bool,
}

/// Every record's `_value`, in order, up to the end of the answer or the first error.
pub(super) fn record_values(text: &str) -> Vec<Value> {
    let mut values = Vec::new();
    let mut table = Table::default();
    for row in rows(text) {
        if row.iter().all(String::is_empty) {
            table = Table::default();
            continue;
        }
        let first = row[0].as_str();
        if first.starts_with('#') {
            if table.header_read {
                table = Table::default();
            }
            match first {
                "#datatype" => table.datatypes = row[1..].to_vec(),
                "#default" => table.defaults = row[1..].to_vec(),
                _ => {}
            }
            continue;
        }
        if !table.header_read {
            let names = &row[1..];
            if names.first().is_some_and(|n| n == "error") {
                return values;
            }
            table.value_column = names.iter().position(|n| n == "_value");
            table.header_read = true;
            continue;
        }
        let Some(column) = table.value_column else {
            values.push(Value::Nil);
            continue;
        };
        let cell = row.get(column + 1).map(String::as_str).unwrap_or_default();
        let cell = if cell.is_empty() {
            table.defaults.get(column).map(String::as_str).unwrap_or("")
        } else {
            cell
        };
        let datatype = table.datatypes.get(column).map(String::as_str);
        match typed(cell, datatype.unwrap_or("string")) {
            Some(value) => values.push(value),
            None => return values,
        }
    }
    values
}

/// A cell as its datatype says; an empty cell is nil; `None` when it does not parse (the Go
/// client stops there).
fn typed(cell: &str, datatype: &str) -> Option<Value> {
    if cell.is_empty() {
        return Some(Value::Nil);
    }
    Some(match datatype {
        "double" => Value::Float(cell.parse().ok()?),
        "long" => Value::Integer(cell.parse().ok()?),
        "unsignedLong" => {
            let n: u64 = cell.parse().ok()?;
            i64::try_from(n).map_or(Value::Float(n as f64), Value::Integer)
        }
        "boolean" => Value::Bool(cell == "true"),
        "dateTime:RFC3339" | "dateTime:RFC3339Nano" => {
            let ts: jiff::Timestamp = cell.parse().ok()?;
            Value::String(go_time(ts))
        }
        _ => Value::String(cell.to_owned()),
    })
}

/// A time as Go's `time.Time` prints in UTC: `2026-01-02 03:04:05.5 +0000 UTC`.
fn go_time(ts: jiff::Timestamp) -> String {
    let utc = ts.to_zoned(jiff::tz::TimeZone::UTC);
    let mut text = utc.strftime("%Y-%m-%d %H:%M:%S").to_string();
    let nanos = ts.subsec_nanosecond();
    if nanos != 0 {
        let fraction = format!("{nanos:09}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    text.push_str(" +0000 UTC");
    text
}

/// A value as Go's `fmt.Sprint` prints it inside a list.
pub(super) fn go_print(value: &Value) -> String {
    match value {
        Value::Nil => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) => go_float(*f),
        Value::String(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// The rows of a CSV text: comma-separated, fields optionally in double quotes (a quote inside
/// doubled), rows ending with LF or CRLF.
fn rows(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => row.push(std::mem::take(&mut field)),
            '\r' if !quoted && chars.peek() == Some(&'\n') => {}
            '\n' if !quoted => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            c => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_go_prints_them() {
        let ts: jiff::Timestamp = "2026-11-27T00:05:01.250Z".parse().unwrap();
        assert_eq!(go_time(ts), "2026-11-27 00:05:01.25 +0000 UTC");
        let whole: jiff::Timestamp = "2026-11-27T00:05:01Z".parse().unwrap();
        assert_eq!(go_time(whole), "2026-11-27 00:05:01 +0000 UTC");
    }

    #[test]
    fn quoted_fields_and_line_ends() {
        assert_eq!(
            rows("a,\"b,c\",\"say \"\"hi\"\"\"\r\n,x\n\n"),
            vec![
                vec!["a".to_owned(), "b,c".to_owned(), "say \"hi\"".to_owned()],
                vec![String::new(), "x".to_owned()],
                vec![String::new()],
            ]
        );
    }
}
