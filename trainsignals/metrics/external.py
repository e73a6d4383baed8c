"""Series trainsignals reads but does not write: node_exporter, Prometheus, Alertmanager."""

from __future__ import annotations

from trainsignals.metrics.model import Component, Kind, Metric

EXTERNAL_METRICS: tuple[Metric, ...] = (
    # --- node_exporter, for the network panels only ---
    Metric(
        "node_network_receive_bytes_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device"),
        "Bytes received per network device.",
    ),
    Metric(
        "node_network_transmit_bytes_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device"),
        "Bytes transmitted per network device.",
    ),
    # --- node_exporter's infiniband collector (collector/infiniband_linux.go), fabric ---
    Metric(
        "node_infiniband_state_id",
        Kind.GAUGE,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Port state (1 down, 2 init, 3 armed, 4 active, 5 act defer).",
    ),
    Metric(
        "node_infiniband_physical_state_id",
        Kind.GAUGE,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Physical port state (5 link up, 2 polling, 3 disabled).",
    ),
    Metric(
        "node_infiniband_link_downed_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Times the link failed to recover from an error and went down.",
    ),
    Metric(
        "node_infiniband_link_error_recovery_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Times the link recovered from an error state.",
    ),
    Metric(
        "node_infiniband_symbol_error_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Minor link errors on the physical lanes.",
    ),
    Metric(
        "node_infiniband_port_errors_received_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Received packets that contained an error.",
    ),
    # Peer comparison (generator/signals/peers.py): a rail's traffic and congestion.
    Metric(
        "node_infiniband_port_data_transmitted_bytes_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Data transmitted on the port, in bytes.",
    ),
    Metric(
        "node_infiniband_port_data_received_bytes_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Data received on the port, in bytes.",
    ),
    Metric(
        "node_infiniband_rate_bytes_per_second",
        Kind.GAUGE,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "The port's link rate (width x speed it trained at), not its traffic.",
    ),
    Metric(
        "node_infiniband_port_transmit_wait_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Ticks during which the port had data to transmit but no data was sent (congestion).",
    ),
    Metric(
        "nccl_bus_bandwidth_gbs",
        Kind.GAUGE,
        Component.NODE_EXPORTER,
        ("node", "comm_id", "rank"),
        "NCCL Inspector (NCCL_INSPECTOR_PROM_DUMP=1, node_exporter's textfile collector): bus "
        "bandwidth of a rank's last collective per communicator, GB/s. Optional.",
    ),
    # --- Prometheus ---
    Metric(
        "up",
        Kind.GAUGE,
        Component.PROMETHEUS,
        ("job", "instance", "node"),
        "1 when the last scrape of a target succeeded.",
    ),
    Metric(
        "ALERTS",
        Kind.GAUGE,
        Component.PROMETHEUS,
        ("alertname", "alertstate", "severity"),
        "Pending and firing alerts.",
    ),
    # --- Prometheus and Alertmanager about themselves (meta-monitoring, generator/meta/) ---
    *(
        Metric(name, kind, Component.PROMETHEUS, labels, help_)
        for name, kind, labels, help_ in (
            (
                "prometheus_rule_evaluation_failures_total",
                Kind.COUNTER,
                ("rule_group",),
                "Rule evaluations that failed.",
            ),
            (
                "prometheus_rule_group_last_duration_seconds",
                Kind.GAUGE,
                ("rule_group",),
                "Duration of the last evaluation of the rule group.",
            ),
            (
                "prometheus_rule_group_interval_seconds",
                Kind.GAUGE,
                ("rule_group",),
                "The rule group's evaluation interval.",
            ),
            (
                "prometheus_rule_group_iterations_missed_total",
                Kind.COUNTER,
                ("rule_group",),
                "Evaluations skipped because the previous one was still running.",
            ),
            (
                "prometheus_notifications_alertmanagers_discovered",
                Kind.GAUGE,
                (),
                "Alertmanagers Prometheus currently sends alerts to.",
            ),
            (
                "prometheus_notifications_errors_total",
                Kind.COUNTER,
                ("alertmanager",),
                "Errors sending alerts to an Alertmanager.",
            ),
            (
                "prometheus_notifications_sent_total",
                Kind.COUNTER,
                ("alertmanager",),
                "Alerts sent to an Alertmanager.",
            ),
            (
                "prometheus_notifications_dropped_total",
                Kind.COUNTER,
                (),
                "Alerts dropped (errors, or a full notification queue).",
            ),
            (
                "prometheus_config_last_reload_successful",
                Kind.GAUGE,
                (),
                "1 when the last configuration reload succeeded.",
            ),
        )
    ),
    Metric(
        "alertmanager_config_last_reload_successful",
        Kind.GAUGE,
        Component.ALERTMANAGER,
        (),
        "1 when the last configuration reload succeeded.",
    ),
    Metric(
        "alertmanager_config_hash",
        Kind.GAUGE,
        Component.ALERTMANAGER,
        (),
        "Hash of the loaded configuration (replicas of one cluster should agree).",
    ),
    Metric(
        "alertmanager_notification_requests_failed_total",
        Kind.COUNTER,
        Component.ALERTMANAGER,
        ("integration",),
        "Notification requests that failed (each retry counts).",
    ),
    Metric(
        "alertmanager_notifications_failed_total",
        Kind.COUNTER,
        Component.ALERTMANAGER,
        ("integration",),
        "Notifications that failed after all retries.",
    ),
    Metric(
        "alertmanager_cluster_members",
        Kind.GAUGE,
        Component.ALERTMANAGER,
        (),
        "Members of the gossip cluster this Alertmanager sees.",
    ),
)
