//! People behind the company's SSO proxy (oauth2-proxy and the like): the proxy authenticates
//! them and passes who they are in headers. Those headers are believed only from a request that
//! also carries the secret shared with the proxy; anyone who can reach casefile directly could
//! otherwise claim to be anyone.

use anyhow::{Context as _, bail};
use axum::http::{HeaderMap, HeaderName};
use subtle::ConstantTimeEq as _;

use super::options::ProxyOptions;
use super::{Identity, Rejection};
use crate::model::Role;

/// The shared secret must be at least this long.
const MIN_SECRET_LEN: usize = 16;

pub(super) struct ProxyAuth {
    secret: Vec<u8>,
    secret_header: HeaderName,
    user_header: HeaderName,
    email_header: HeaderName,
    groups_header: HeaderName,
    /// Group → role; a person gets the highest role of their groups.
    group_roles: Vec<(String, Role)>,
    /// The role of a person in none of those groups (`None`: nothing is allowed).
    default_role: Option<Role>,
    /// How long a stream opened through the proxy stays open.
    stream_lifetime: std::time::Duration,
}

fn header_name(flag: &str, name: &str) -> anyhow::Result<HeaderName> {
    HeaderName::try_from(name.trim())
        .with_context(|| format!("{flag}: {name:?} is not a header name"))
}

impl ProxyAuth {
    pub(super) fn new(options: &ProxyOptions) -> anyhow::Result<ProxyAuth> {
        let Some(secret) = options.proxy_secret.as_deref().filter(|s| !s.is_empty()) else {
            bail!(
                "--auth proxy needs --proxy-secret (CASEFILE_PROXY_SECRET): the secret the SSO \
                 proxy sends in {} so that casefile can trust its identity headers",
                options.proxy_secret_header
            );
        };
        if secret.len() < MIN_SECRET_LEN {
            bail!("--proxy-secret must be at least {MIN_SECRET_LEN} characters long");
        }
        let group_roles = options
            .proxy_group_roles
            .iter()
            .filter(|pair| !pair.trim().is_empty())
            .map(|pair| {
                let (group, role) = pair
                    .split_once('=')
                    .with_context(|| format!("--proxy-group-role: {pair:?} is not GROUP=ROLE"))?;
                let role = parse_role(role).with_context(|| {
                    format!("--proxy-group-role: {pair:?} does not name a role")
                })?;
                Ok((group.trim().to_owned(), role))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let default_role = match options.proxy_default_role.trim() {
            "none" => None,
            role => Some(parse_role(role).with_context(|| {
                format!(
                    "--proxy-default-role: {role:?} is not reader, notifier, operator, writer, admin or none"
                )
            })?),
        };
        Ok(ProxyAuth {
            secret: secret.as_bytes().to_vec(),
            secret_header: header_name("--proxy-secret-header", &options.proxy_secret_header)?,
            user_header: header_name("--proxy-user-header", &options.proxy_user_header)?,
            email_header: header_name("--proxy-email-header", &options.proxy_email_header)?,
            groups_header: header_name("--proxy-groups-header", &options.proxy_groups_header)?,
            group_roles,
            default_role,
            stream_lifetime: options.proxy_stream_lifetime,
        })
    }

    pub(super) fn stream_lifetime(&self) -> std::time::Duration {
        self.stream_lifetime
    }

    pub(super) fn identify(&self, headers: &HeaderMap) -> Result<Identity, Rejection> {
        // A proxy that appends its headers instead of replacing the client's would otherwise
        // let the client's copy speak first.
        let names = [
            &self.secret_header,
            &self.user_header,
            &self.email_header,
            &self.groups_header,
        ];
        if names
            .iter()
            .any(|name| headers.get_all(*name).iter().count() > 1)
        {
            return Err(Rejection::Unauthenticated);
        }
        let presented = headers
            .get(&self.secret_header)
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        if !bool::from(presented.ct_eq(&self.secret)) {
            return Err(Rejection::Unauthenticated);
        }
        let text = |name: &HeaderName| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        let user = text(&self.user_header)
            .or_else(|| text(&self.email_header))
            .ok_or(Rejection::Unauthenticated)?;
        // `token:` names API tokens in the records; a person can never be recorded as one.
        if user.starts_with("token:") || user.chars().count() > 200 {
            return Err(Rejection::Unauthenticated);
        }
        let groups: Vec<&str> = text(&self.groups_header)
            .map(|v| v.split(',').map(str::trim).collect())
            .unwrap_or_default();
        let role = self
            .group_roles
            .iter()
            .filter(|(group, _)| groups.contains(&group.as_str()))
            .map(|(_, role)| *role)
            .max()
            .or(self.default_role)
            .ok_or_else(|| {
                Rejection::Forbidden(format!(
                    "{user} has no casefile role: none of their groups is mapped to one"
                ))
            })?;
        Ok(Identity {
            actor: Some(user.to_owned()),
            role,
            token: None,
            from_proxy: true,
            scope: None,
        })
    }
}

fn parse_role(name: &str) -> Option<Role> {
    crate::model::from_db_name(name.trim())
}
