//! An example V2 infer request built from a model's metadata (`GET /v2/models/NAME`), one example
//! row of ones for each input (a `-1` dimension is 1): what `skiff load --model NAME` sends and
//! what the web app's "Try it" curl shows.

use serde_json::{Value, json};

/// Most elements an example input may have.
const MAX_ELEMENTS: u64 = 16 * 1024 * 1024;

/// The V2 infer body for the metadata document `metadata`.
pub fn example_request(metadata: &Value) -> Result<Value, String> {
    let inputs = metadata["inputs"].as_array().filter(|i| !i.is_empty()).ok_or("the metadata lists no inputs")?;
    let inputs = inputs
        .iter()
        .map(|input| {
            let name = input["name"].as_str().ok_or("an input without a name")?;
            let datatype = input["datatype"].as_str().ok_or_else(|| format!("input {name}: no datatype"))?;
            let shape: Vec<u64> = input["shape"]
                .as_array()
                .ok_or_else(|| format!("input {name}: no shape"))?
                .iter()
                .map(|d| match d.as_i64() {
                    Some(n) if n > 0 => Ok(n as u64),
                    Some(-1) => Ok(1),
                    _ => Err(format!("input {name}: dimension {d} is neither positive nor -1")),
                })
                .collect::<Result<_, String>>()?;
            let elements = shape.iter().try_fold(1u64, |n, d| n.checked_mul(*d)).unwrap_or(u64::MAX);
            if elements > MAX_ELEMENTS {
                return Err(format!("input {name}: {elements} elements is too many for an example"));
            }
            let one = match datatype {
                "BOOL" => json!(true),
                "BYTES" => json!("a"),
                "FP16" | "FP32" | "FP64" | "BF16" => json!(1.0),
                _ => json!(1),
            };
            Ok(json!({ "name": name, "shape": shape, "datatype": datatype, "data": vec![one; elements as usize] }))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(json!({ "inputs": inputs }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_example_row_of_ones_per_input() {
        let metadata = json!({
            "name": "iris",
            "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 4]},
                       {"name": "mask", "datatype": "BOOL", "shape": [2]}]
        });
        let body = example_request(&metadata).unwrap();
        assert_eq!(
            body,
            json!({"inputs": [
                {"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1.0, 1.0, 1.0, 1.0]},
                {"name": "mask", "shape": [2], "datatype": "BOOL", "data": [true, true]}
            ]})
        );
    }

    #[test]
    fn metadata_without_usable_inputs_is_refused() {
        assert!(example_request(&json!({"name": "m"})).is_err());
        let zero = json!({"inputs": [{"name": "x", "datatype": "FP32", "shape": [0]}]});
        assert!(example_request(&zero).unwrap_err().contains("dimension 0"));
        let huge = json!({"inputs": [{"name": "x", "datatype": "FP32", "shape": [100000, 100000]}]});
        assert!(example_request(&huge).unwrap_err().contains("too many"));
    }
}
