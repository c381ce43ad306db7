//! The sink rule alone: addresses and names, each mode, the allow-list, the flags round trip.

use super::*;
use crate::logger::LoggerArgs;

fn cluster(allowed: &[&str]) -> SinkPolicy {
    let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
    SinkPolicy::cluster("skiff-system", &["10.96.0.10".to_owned()], &allowed).unwrap()
}

fn refused(policy: &SinkPolicy, url: &str) -> String {
    policy.check_url(url).expect_err(url)
}

#[test]
fn link_local_and_metadata_addresses_are_refused_in_every_mode() {
    for policy in [cluster(&[]), SinkPolicy::standalone(), SinkPolicy::default()] {
        for url in [
            "http://169.254.169.254/latest/meta-data/",
            "http://169.254.0.1:8080/",
            "http://[fe80::1]/",
            "http://[febf::1]/",
            "http://[::ffff:169.254.169.254]/",
            "http://[fd00:ec2::254]/",
        ] {
            let why = refused(&policy, url);
            assert!(why.contains("link-local") || why.contains("metadata"), "{url}: {why}");
            assert!(why.contains("logger.allowedHosts"), "the message says how to allow it: {why}");
        }
        policy.check_url("http://[fec0::1]/").unwrap();
        policy.check_url("http://169.253.255.255/").unwrap();
    }
}

#[test]
fn loopback_is_refused_on_a_cluster_and_allowed_in_skiff_up() {
    let loopback = [
        "http://127.0.0.1:8081/",
        "http://127.8.9.10/",
        "http://[::1]:9000/",
        "http://localhost:8081/",
        "http://LOCALHOST./",
        "http://admin.localhost/",
        "http://0.0.0.0:8081/",
        "http://[::]/",
        "http://[::ffff:127.0.0.1]/",
    ];
    for url in loopback {
        assert!(refused(&cluster(&[]), url).contains("loopback"), "{url}");
        SinkPolicy::standalone().check_url(url).unwrap();
    }
}

#[test]
fn the_platforms_own_services_are_refused_by_name_on_a_cluster() {
    let policy = cluster(&[]);
    for url in [
        "http://skiff-router.skiff-system/",
        "http://skiff-activator.skiff-system.svc:8080/",
        "http://skiff-controller.skiff-system.svc.cluster.local:8081/metrics",
        "http://SKIFF-WEB.skiff-system.svc.cluster.local./",
        "http://kubernetes.default.svc/api",
        "http://10.96.0.10/",
    ] {
        assert!(refused(&policy, url).contains("the platform's own components"), "{url}");
    }
    for url in [
        "http://sink.monitoring.svc.cluster.local/events",
        "http://skiff-system.example.com/",
        "http://notskiff-system/",
        "http://10.244.0.1:9000/events",
        "http://message-dumper.default/",
    ] {
        policy.check_url(url).unwrap();
        SinkPolicy::standalone().check_url(url).unwrap();
    }
}

#[test]
fn the_allow_list_lets_names_addresses_and_blocks_through() {
    let policy = cluster(&["127.0.0.1", "169.254.10.0/24", "*.skiff-system.svc", "LOCALHOST"]);
    policy.check_url("http://127.0.0.1:9/").unwrap();
    policy.check_url("http://169.254.10.7/").unwrap();
    policy.check_url("http://localhost/").unwrap();
    policy.check_url("http://skiff-web.skiff-system.svc/").unwrap();
    assert!(refused(&policy, "http://169.254.169.254/").contains("link-local"));
    assert!(refused(&policy, "http://127.0.0.2/").contains("loopback"));
    assert!(refused(&policy, "http://skiff-web.skiff-system/").contains("own components"));
}

#[test]
fn a_name_is_judged_again_by_each_address_it_resolves_to() {
    let policy = cluster(&[]);
    policy.check_host("metadata.attacker.example").unwrap();
    let why = policy.check_addr("metadata.attacker.example", "169.254.169.254".parse().unwrap()).unwrap_err();
    assert!(why.starts_with("metadata.attacker.example (169.254.169.254) is link-local"), "{why}");
    assert!(policy.check_addr("rebind.example", "127.0.0.1".parse().unwrap()).unwrap_err().contains("loopback"));
    policy.check_addr("sink.example", "10.0.0.5".parse().unwrap()).unwrap();
    SinkPolicy::standalone().check_addr("localhost", "::1".parse().unwrap()).unwrap();
    let allowed = cluster(&["sink.example"]);
    allowed.check_addr("sink.example", "127.0.0.1".parse().unwrap()).unwrap();
}

#[test]
fn urls_that_are_not_http_with_a_host_are_refused() {
    for url in ["https://sink.example/", "sink.example/events", "http:///events", "ftp://sink/", ""] {
        assert!(refused(&SinkPolicy::standalone(), url).contains("http://"), "{url:?}");
    }
}

#[test]
fn the_flags_give_back_the_same_policy_and_bad_patterns_are_named() {
    let flags = |policy: &SinkPolicy| {
        let bare = LoggerArgs {
            logger_url: Some("http://sink".into()),
            logger_mode: String::new(),
            component: String::new(),
            ..LoggerArgs::default()
        };
        bare.with_sinks(policy).to_args().split_off(2)
    };
    let policy = cluster(&["10.1.0.0/16", "sink.example", "[fd00::1]"]);
    let args = flags(&policy);
    assert!(!args.contains(&"--logger-allow-loopback".to_owned()), "{args:?}");
    let list = |flag: &str| -> Vec<String> {
        let at = args.iter().position(|a| a == flag).unwrap();
        args[at + 1].split(',').map(str::to_owned).collect()
    };
    let again =
        SinkPolicy::from_flags(false, &list("--logger-protected-hosts"), &list("--logger-allowed-hosts")).unwrap();
    assert_eq!(again, policy);
    assert_eq!(flags(&SinkPolicy::standalone()), ["--logger-allow-loopback"]);
    for bad in ["10.0.0.0/33", "*.", "http://x", "a b"] {
        let e = SinkPolicy::cluster("skiff-system", &[], &[bad.to_owned()]).unwrap_err();
        assert!(e.contains(bad.trim_start_matches("http://")) || e.contains("suffix"), "{bad}: {e}");
    }
}
