//! `hostPort`s of pods in the pod network, as the CNI portmap plugin gives them: a TCP listener
//! on the node's IP (or the port's `hostIP`) for each container port that names a `hostPort`,
//! forwarding every connection to the pod's IP and `containerPort`. A userspace copy rather than
//! portmap's DNAT: the agent adds no iptables rules. Only TCP.

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::PodSpec;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tracing::debug;

/// Every `(host address, container port)` pair `spec` asks for, `node_ip` where no `hostIP` is set.
pub fn wanted(spec: &PodSpec, node_ip: IpAddr) -> Vec<(SocketAddr, u16)> {
    let containers = spec.init_containers.iter().flatten().chain(&spec.containers);
    let ports = containers.flat_map(|c| c.ports.iter().flatten());
    ports
        .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .filter_map(|p| {
            let host_port = u16::try_from(p.host_port?).ok()?;
            let ip = p.host_ip.as_deref().and_then(|ip| ip.parse().ok()).unwrap_or(node_ip);
            Some((SocketAddr::new(ip, host_port), u16::try_from(p.container_port).ok()?))
        })
        .collect()
}

/// Listens on each host address of `wanted` and forwards to `pod_ip`; the tasks end when aborted.
pub async fn forward(wanted: &[(SocketAddr, u16)], pod_ip: IpAddr) -> Result<Vec<JoinHandle<()>>, String> {
    let mut tasks = Vec::new();
    for &(host, container_port) in wanted {
        let listener = match TcpListener::bind(host).await {
            Ok(listener) => listener,
            Err(e) => {
                tasks.iter().for_each(JoinHandle::abort);
                return Err(format!("hostPort {host}: {e}"));
            }
        };
        let target = SocketAddr::new(pod_ip, container_port);
        tasks.push(tokio::spawn(async move {
            while let Ok((mut inbound, peer)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else { return };
                    let copied = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    debug!(%peer, %target, ?copied, "hostPort connection closed");
                });
            }
        }));
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn host_ports_come_from_the_spec_and_a_taken_one_is_refused() {
        let spec: PodSpec = serde_json::from_value(serde_json::json!({"containers": [
            {"name": "c", "ports": [{"containerPort": 8095, "hostPort": 18095}, {"containerPort": 9000}]},
        ]}))
        .unwrap();
        let node: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(wanted(&spec, node), [("127.0.0.1:18095".parse::<SocketAddr>().unwrap(), 8095)]);

        let pod = TcpListener::bind("127.0.0.2:0").await.unwrap();
        let port = pod.local_addr().unwrap().port();
        let tasks = forward(&[("127.0.0.1:0".parse().unwrap(), port)], "127.0.0.2".parse().unwrap()).await;
        assert_eq!(tasks.unwrap().len(), 1);
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let error = forward(&[(taken.local_addr().unwrap(), port)], node).await.unwrap_err();
        assert!(error.starts_with("hostPort 127.0.0.1:"), "{error}");
    }
}
