//! `skiff load --openai` end to end: the real binary against a real `skiff up` serving the real
//! llama.cpp server (see `common::llm`) from zero, the chat completions routed by the `"model"` of
//! their bodies. A burst at zero then a burst on the warm replica: every stream answered, the
//! first burst's streams counted as cold starts (their answers carried the cold-start header) and
//! the second's as warm, every stream's first token before its end, one inter-token gap fewer than
//! its content events, and its output tokens counted from those events (this server sends no
//! `usage` in a stream), said so, and never more than the server counts for such an answer.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::llm::{self, replicas};
use serde_json::{Value, json};

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

/// Streams per burst, and tokens each asks for.
const BURST: u64 = 3;
const MAX_TOKENS: u64 = 12;

/// The server's own `usage.completion_tokens` for a whole (not streamed) answer of `MAX_TOKENS`.
async fn usage(addr: std::net::SocketAddr) -> u64 {
    let body = json!({"model": "llama", "messages": [{"role": "user", "content": "Count"}], "max_tokens": MAX_TOKENS});
    let url = format!("http://{addr}/openai/v1/chat/completions");
    let headers = [("content-type", "application/json")];
    let reply = common::send(http::Method::POST, &url, Bytes::from(body.to_string()), &headers).await.unwrap();
    let answer = reply.json();
    assert_eq!(answer["choices"][0]["finish_reason"], "length", "{answer}");
    answer["usage"]["completion_tokens"].as_u64().unwrap_or_else(|| panic!("no usage: {answer}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skiff_load_openai_times_streams_from_zero_and_separates_the_cold_ones() {
    let isvc = llm::isvc("containerConcurrency: 4\nmaxReplicas: 1");
    let (dir, up) = llm::up(CONFIG, &isvc);
    up.wait_for("llama at zero", Duration::from_secs(60), |s| replicas(s) == (0, 0)).await;

    let report = dir.path().join("report.html");
    let url = format!("http://{}/openai/v1/chat/completions", up.addr);
    let (admin, burst, max_tokens) = (up.admin.to_string(), BURST.to_string(), MAX_TOKENS.to_string());
    let args = [
        "load",
        &url,
        "--openai",
        "--model",
        "llama",
        "--max-tokens",
        &max_tokens,
        "--burst",
        &burst,
        "--cycles",
        "2",
        "--settle",
        "1s",
        "-d",
        "2m",
        "-t",
        "5m",
        "--admin",
        &admin,
        "--json",
        "-o",
        report.to_str().unwrap(),
    ];
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    let llm = &summary["llm"];
    eprintln!("{llm:#}");
    assert_eq!(
        (summary["requests"].as_u64(), summary["ok"].as_u64()),
        (Some(2 * BURST), Some(2 * BURST)),
        "{summary:#}"
    );

    // The first burst met zero, the second the warm replica.
    assert_eq!((llm["coldStarts"]["streams"].as_u64(), llm["warm"]["streams"].as_u64()), (Some(BURST), Some(BURST)));
    let first_ended = summary["cycleResults"][0]["loadedS"].as_f64().unwrap();
    let streams = llm["streams"].as_array().unwrap();
    assert_eq!(streams.len() as u64, 2 * BURST);
    let server_count = usage(up.addr).await;
    for s in streams {
        let first_burst = s["t"].as_f64().unwrap() < first_ended;
        assert_eq!(s["coldStart"].as_bool(), Some(first_burst), "{s}");
        assert!(s["ttftMs"].as_f64().unwrap() < s["endToEndMs"].as_f64().unwrap(), "{s}");
        let events = s["contentEvents"].as_u64().unwrap();
        assert_eq!(s["itls"].as_u64(), Some(events - 1), "one gap between each two content events: {s}");
        // llama-cpp-python's server sends no `usage` in a stream (it ignores `stream_options`),
        // so the content events are counted, and the summary says so. They are at most the
        // tokens the server counts: some of its events carry no text (a token whose bytes do not
        // make a whole UTF-8 character; random weights sample many).
        assert_eq!(s["tokensFrom"], "counted", "{s}");
        assert_eq!(s["outputTokens"].as_u64(), Some(events), "{s}");
        assert!((1..=server_count).contains(&events), "{events} events, the server counts {server_count}: {s}");
    }
    let sum = |field: &str| streams.iter().map(|s| s[field].as_u64().unwrap()).sum::<u64>();
    assert_eq!(llm["tokensCounted"].as_u64(), Some(2 * BURST));
    assert_eq!(llm["all"]["outputTokens"].as_u64(), Some(sum("outputTokens")));
    assert_eq!(llm["all"]["itl"]["count"].as_u64(), Some(sum("itls")));
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("<title>Time to first token</title>") && html.contains("<title>Inter-token latency</title>"));
    assert!(up.stop().success());
}
