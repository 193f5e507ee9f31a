//! The figures of each measured cell, printed as a Markdown table.

/// One query × clients × server.
pub struct Row {
    pub query: &'static str,
    pub clients: usize,
    pub server: &'static str,
    pub p50: f64,
    pub p99: f64,
    pub rps: f64,
    pub failures: u64,
    pub server_cpu_ms: f64,
    /// `None` where PostgreSQL is not a process of its own (embedded).
    pub pg_cpu_ms: Option<f64>,
    /// `Err` says why there is no figure.
    pub statements: Result<f64, String>,
    pub bytes: u64,
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() && b.is_finite() {
        format!("{:.2}", a / b)
    } else {
        "–".into()
    }
}

/// The table; rows of other servers are compared with the PostGraphile row of their cell.
pub fn print(rows: &[Row]) {
    println!();
    println!(
        "| query | clients | server | p50 ms | p99 ms | req/s | server CPU ms/req | PG CPU ms/req | statements/req | bytes | vs PG5 (p50 / req/s / CPU) |"
    );
    println!("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for row in rows {
        let peer = rows
            .iter()
            .find(|r| r.server == "PG5" && r.query == row.query && r.clients == row.clients);
        let versus = match peer {
            Some(p) if row.server != "PG5" => {
                let cpu = |r: &Row| r.server_cpu_ms + r.pg_cpu_ms.unwrap_or(0.0);
                format!(
                    "p50 ×{} / req/s ×{} / CPU ×{}",
                    ratio(row.p50, p.p50),
                    ratio(row.rps, p.rps),
                    ratio(cpu(row), cpu(p))
                )
            }
            _ => "–".into(),
        };
        let failures = if row.failures > 0 {
            format!(" **{} FAILED**", row.failures)
        } else {
            String::new()
        };
        println!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.0}{} | {:.2} | {} | {} | {} | {} |",
            row.query,
            row.clients,
            row.server,
            row.p50,
            row.p99,
            row.rps,
            failures,
            row.server_cpu_ms,
            row.pg_cpu_ms.map_or("–".into(), |v| format!("{v:.2}")),
            match &row.statements {
                Ok(v) => format!("{v:.1}"),
                Err(why) => why.clone(),
            },
            row.bytes,
            versus
        );
    }
    println!(
        "(vs PG5: casefile / PostGraphile 5; CPU is the server's plus PostgreSQL's per request)"
    );
    println!();
}
