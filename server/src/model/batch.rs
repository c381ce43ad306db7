//! Dynamic batching, the pure part: which requests can share a run, stacking them on the first
//! dimension, and splitting the outputs back.

use crate::tensor::{Tensor, element_count};

/// Two requests can share a run when their inputs agree on every dimension but the first.
/// Inputs are in graph order (see [`crate::model::ModelSpec::check_inputs`]).
pub fn compatible(a: &[Tensor], b: &[Tensor]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.name == y.name && x.shape.len() == y.shape.len() && !x.shape.is_empty() && x.shape[1..] == y.shape[1..]
        })
}

/// Splits requests into groups of mutually compatible ones, keeping arrival order inside a group.
pub fn group<T>(items: Vec<T>, inputs: impl Fn(&T) -> &[Tensor]) -> Vec<Vec<T>> {
    let mut groups: Vec<Vec<T>> = Vec::new();
    for item in items {
        match groups.iter_mut().find(|g| compatible(inputs(&g[0]), inputs(&item))) {
            Some(g) => g.push(item),
            None => groups.push(vec![item]),
        }
    }
    groups
}

/// Stacks compatible requests' inputs along the first dimension, into new tensors (the requests
/// keep theirs, to run alone if the batch fails).
pub fn stack<'a>(requests: impl IntoIterator<Item = &'a [Tensor]>) -> Vec<Tensor> {
    let mut requests = requests.into_iter();
    let mut stacked = requests.next().map(<[Tensor]>::to_vec).unwrap_or_default();
    for request in requests {
        for (into, tensor) in stacked.iter_mut().zip(request) {
            into.shape[0] += tensor.shape[0];
            into.data
                .append(tensor.data.clone())
                .expect("compatible requests share datatypes (checked against the model)");
        }
    }
    stacked
}

/// Splits batched outputs into one set per request, `rows[i]` rows for request `i`.
/// Fails when an output's first dimension is not the total of `rows`.
pub fn split(outputs: Vec<Tensor>, rows: &[usize]) -> Result<Vec<Vec<Tensor>>, String> {
    let total: usize = rows.iter().sum();
    let mut per_request: Vec<Vec<Tensor>> = rows.iter().map(|_| Vec::with_capacity(outputs.len())).collect();
    for output in outputs {
        if output.shape.first() != Some(&total) {
            return Err(format!(
                "output '{}' has shape {:?}, which does not start with the batch size {total}",
                output.name, output.shape
            ));
        }
        let row_len = element_count(&output.shape[1..]);
        let mut start = 0;
        for (request, &n) in per_request.iter_mut().zip(rows) {
            let mut shape = output.shape.clone();
            shape[0] = n;
            let end = start + n * row_len;
            request.push(Tensor { name: output.name.clone(), shape, data: output.data.slice(start, end) });
            start = end;
        }
    }
    Ok(per_request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::TensorData;

    fn t(name: &str, shape: &[usize], data: Vec<f32>) -> Tensor {
        Tensor { name: name.into(), shape: shape.to_vec(), data: TensorData::F32(data) }
    }

    #[test]
    fn stack_then_split_gives_each_request_its_rows() {
        let r1 = vec![t("x", &[1, 2], vec![1.0, 2.0])];
        let r2 = vec![t("x", &[2, 2], vec![3.0, 4.0, 5.0, 6.0])];
        let stacked = stack([r1.as_slice(), r2.as_slice()]);
        assert_eq!(stacked, vec![t("x", &[3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]);
        let back = split(stacked, &[1, 2]).unwrap();
        assert_eq!(back, vec![r1, r2]);
    }

    #[test]
    fn split_refuses_outputs_without_the_batch_dimension() {
        let err = split(vec![t("y", &[1], vec![0.0])], &[1, 2]).unwrap_err();
        assert_eq!(err, "output 'y' has shape [1], which does not start with the batch size 3");
    }

    #[test]
    fn requests_group_by_trailing_dimensions() {
        let a = vec![t("x", &[1, 2], vec![0.0; 2])];
        let b = vec![t("x", &[3, 2], vec![0.0; 6])];
        let c = vec![t("x", &[1, 3], vec![0.0; 3])];
        let groups = group(vec![a.clone(), c.clone(), b.clone()], |r| r.as_slice());
        assert_eq!(groups, vec![vec![a, b], vec![c]]);
        assert!(!compatible(&[t("x", &[], vec![0.0])], &[t("x", &[], vec![0.0])]));
    }
}
