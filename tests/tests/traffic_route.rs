//! `lossless traffic send` to a destination behind a router: sender ns —veth— router ns
//! (the kernel forwards) —veth— receiver ns. Without `--dst-mac` the sender asks the kernel
//! for the route's next hop, resolves the gateway's MAC (no neighbour entry exists before),
//! says which gateway it used, and the router's kernel forwards every frame to the receiver.

use std::net::Ipv4Addr;

use lossless_tests::bed::{lossless_bin, privileged, subnet_link};
use serde_json::Value;
use sysutil::netns::{check, Endpoint, Namespace};

/// Runs `lossless ARGS` in `ns` and parses its JSON summary, failing with its stderr.
fn lossless_json(ns: &Namespace, args: &[&str]) -> Value {
    let output = ns.command(lossless_bin()).args(args).output().unwrap();
    let output = check(&format!("lossless {args:?}"), output).unwrap();
    serde_json::from_slice(&output.stdout).unwrap()
}

/// What `ip -j ARGS` prints in `ns`.
fn ip_json(ns: &Namespace, args: &[&str]) -> Value {
    let output = ns.command("ip").arg("-j").args(args).output().unwrap();
    let output = check(&format!("ip {args:?}"), output).unwrap();
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The kernel's receive counter of `iface` in `ns` (`ip -s link`).
fn rx_packets(ns: &Namespace, iface: &str) -> u64 {
    let links = ip_json(ns, &["-s", "link", "show", "dev", iface]);
    links[0]["stats64"]["rx"]["packets"].as_u64().unwrap()
}

/// The MAC of `ip` in the neighbour table of `ns` (`ip neigh`), if it has a usable entry.
fn neighbour(ns: &Namespace, ip: Ipv4Addr) -> Option<String> {
    let entries = ip_json(ns, &["neigh", "show", &ip.to_string()]);
    entries
        .as_array()?
        .iter()
        .find_map(|e| e["lladdr"].as_str().map(str::to_owned))
}

fn mac(endpoint: &Endpoint) -> String {
    endpoint
        .mac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[test]
fn send_behind_a_gateway_goes_to_the_gateways_mac() {
    if !privileged("send_behind_a_gateway_goes_to_the_gateways_mac") {
        return;
    }
    let sender_ns = Namespace::create("rtsnd").unwrap();
    let router_ns = Namespace::create("rtrtr").unwrap();
    let receiver_ns = Namespace::create("rtrcv").unwrap();
    // The router is each subnet's .1, the hosts' gateway.
    let (router_in, sender) = subnet_link(&router_ns, &sender_ns, [10, 41, 1]).unwrap();
    let (_router_out, receiver) = subnet_link(&router_ns, &receiver_ns, [10, 41, 2]).unwrap();
    let output = router_ns
        .command("sysctl")
        .args(["-qw", "net.ipv4.ip_forward=1"])
        .output()
        .unwrap();
    check("sysctl ip_forward", output).unwrap();
    sender_ns
        .ip(&["route", "add", "10.41.2.0/24", "via", "10.41.1.1"])
        .unwrap();
    assert_eq!(neighbour(&sender_ns, router_in.ipv4), None);

    let rx_before = rx_packets(&receiver_ns, &receiver.ifname);
    let sent = lossless_json(
        &sender_ns,
        &[
            "traffic",
            "send",
            "--iface",
            &sender.ifname,
            "--dst-ip",
            "10.41.2.2",
            "--rate",
            "10mbit",
            "--count",
            "200",
            "--json",
        ],
    );
    assert_eq!(sent["packets"], 200, "{sent}");
    assert_eq!(sent["gateway"], "10.41.1.1", "{sent}");
    assert_eq!(sent["dst_mac"], mac(&router_in), "{sent}");
    // The kernel resolved the gateway when the sender asked it to.
    assert_eq!(neighbour(&sender_ns, router_in.ipv4), Some(mac(&router_in)));
    // The router's kernel forwarded them: the receiver's kernel counted them arriving.
    assert!(
        rx_packets(&receiver_ns, &receiver.ifname) - rx_before >= 200,
        "the router did not forward the frames"
    );

    // The text summary names the gateway. A destination no route covers is, for a socket bound
    // to the interface, on the link (the kernel's rule): its own neighbour entry is looked for.
    let send_one = |dst_ip: &str| {
        sender_ns
            .command(lossless_bin())
            .args(["traffic", "send", "--iface", &sender.ifname])
            .args(["--dst-ip", dst_ip, "--count", "1"])
            .output()
            .unwrap()
    };
    let output = send_one("10.41.2.2");
    let text = String::from_utf8(check("traffic send", output).unwrap().stdout).unwrap();
    assert!(
        text.contains(&format!(
            "10.41.2.2 {} (via gateway 10.41.1.1)",
            mac(&router_in)
        )),
        "{text}"
    );
    let output = send_one("10.42.0.9");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&format!(
            "no neighbour entry for 10.42.0.9 on {} after",
            sender.ifname
        )),
        "{stderr}"
    );
}
