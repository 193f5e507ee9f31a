//! `casefile check-distribution`: checks the database's schema, as it is (no migration is
//! applied), against the placements of `docs/scale-out.md`, and fails if anything would not
//! distribute by session.

use anyhow::Context as _;

use super::database::with_database_as_is;
use crate::db::DatabaseArgs;
use crate::distribution::{Placements, check};

pub async fn run(args: &DatabaseArgs) -> anyhow::Result<()> {
    let placements = Placements::documented().context("docs/scale-out.md")?;
    with_database_as_is(args, |store| async move {
        let catalog = store.catalog().await?;
        let findings = check(&catalog, &placements);
        for finding in &findings {
            println!("{finding}");
        }
        if !findings.is_empty() {
            let n = findings.len();
            anyhow::bail!(
                "{n} finding{}: the schema does not distribute by session (docs/scale-out.md)",
                if n == 1 { "" } else { "s" }
            );
        }
        println!(
            "{} tables checked, all keys distribute",
            catalog.tables.len()
        );
        Ok(())
    })
    .await
}
