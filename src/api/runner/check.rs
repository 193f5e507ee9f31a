//! Full validation of an operation, on a schema of its own that executes nothing.
//!
//! async-graphql computes an operation's depth and cost only while validating it inside
//! `Schema::execute`, and hands them out only to an extension. The schema that runs operations
//! has none (see the module above), so each operation is first sent through this one: its
//! extension keeps the figures, codes the validation errors, and stops before execution.

use std::sync::{Arc, OnceLock};

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextExecute, NextValidation,
};
use async_graphql::{Response, SchemaEnv, ServerError, ValidationResult, Value};

use super::codes::code_validation_error;

/// Where the checker leaves an operation's figures (put into the probe request's data).
#[derive(Clone, Default)]
pub struct Figures(Arc<OnceLock<ValidationResult>>);

impl Figures {
    pub fn get(&self) -> Option<ValidationResult> {
        self.0.get().copied()
    }
}

/// Installs the check on a checking schema; keeps the schema's types (its registry) for the
/// verdicts checked without it (see [`super::verdicts`]).
#[derive(Clone, Default)]
pub struct Check {
    schema: Arc<OnceLock<SchemaEnv>>,
}

impl Check {
    /// The schema's types, once it has checked an operation.
    pub fn schema(&self) -> Option<&SchemaEnv> {
        self.schema.get()
    }
}

impl ExtensionFactory for Check {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(self.clone())
    }
}

#[async_graphql::async_trait::async_trait]
impl Extension for Check {
    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        let result = next.run(ctx).await.map_err(|mut errors| {
            errors.iter_mut().for_each(code_validation_error);
            errors
        })?;
        self.schema.get_or_init(|| ctx.schema_env.clone());
        if let Some(figures) = ctx.data_opt::<Figures>() {
            let _ = figures.0.set(result);
        }
        Ok(result)
    }

    async fn execute(
        &self,
        _: &ExtensionContext<'_>,
        _: Option<&str>,
        _: NextExecute<'_>,
    ) -> Response {
        // Validated: the operation runs on the other schema.
        Response::new(Value::Null)
    }
}
