//! API Gateway HTTP API route keys: `$default`, or a method (`ANY` for every one) and a path whose segments are
//! literals, `{name}` (one segment) or, last, `{name+}` (the rest of the path).

use std::collections::BTreeMap;

/// One route key, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteKey {
    key: String,
    /// `None`: `$default`, every request.
    route: Option<(Option<String>, Vec<Segment>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param(String),
    Greedy(String),
}

impl RouteKey {
    /// Parses `$default`, `ANY /{proxy+}`, `POST /orders/{id}`.
    ///
    /// # Errors
    ///
    /// Not a method and a path starting with `/`, or a greedy `{name+}` that is not the last segment.
    pub fn parse(key: &str) -> Result<Self, String> {
        if key == "$default" {
            return Ok(Self {
                key: key.to_owned(),
                route: None,
            });
        }
        let (method, path) = key
            .split_once(' ')
            .filter(|(m, p)| !m.is_empty() && p.starts_with('/'))
            .ok_or("expected `$default` or `METHOD /path`")?;
        let method = (method != "ANY").then(|| method.to_uppercase());
        let pieces: Vec<&str> = path[1..].split('/').filter(|s| !s.is_empty()).collect();
        let mut segments = Vec::with_capacity(pieces.len());
        for (i, piece) in pieces.iter().enumerate() {
            let segment = match piece.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                Some(name) => match name.strip_suffix('+') {
                    Some(name) if i + 1 == pieces.len() => Segment::Greedy(name.to_owned()),
                    Some(_) => return Err("a greedy `{name+}` must be the last segment".into()),
                    None => Segment::Param(name.to_owned()),
                },
                None => Segment::Literal((*piece).to_owned()),
            };
            segments.push(segment);
        }
        Ok(Self {
            key: key.to_owned(),
            route: Some((method, segments)),
        })
    }

    /// The key as the template wrote it (the event's `routeKey`).
    pub fn as_str(&self) -> &str {
        &self.key
    }

    /// The path parameters when a request of `method` to `path` takes this route.
    pub fn matches(&self, method: &str, path: &str) -> Option<BTreeMap<String, String>> {
        let Some((want, segments)) = &self.route else {
            return Some(BTreeMap::new());
        };
        if want.as_deref().is_some_and(|m| m != method) {
            return None;
        }
        let pieces: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let pieces: Vec<&str> = if pieces == [""] { Vec::new() } else { pieces };
        let mut parameters = BTreeMap::new();
        for (i, segment) in segments.iter().enumerate() {
            match segment {
                Segment::Greedy(name) => {
                    let rest = pieces.get(i..).filter(|r| !r.is_empty())?;
                    parameters.insert(name.clone(), rest.join("/"));
                    return Some(parameters);
                }
                Segment::Literal(literal) => {
                    if pieces.get(i) != Some(&literal.as_str()) {
                        return None;
                    }
                }
                Segment::Param(name) => {
                    let piece = pieces.get(i).filter(|p| !p.is_empty())?;
                    parameters.insert(name.clone(), (*piece).to_owned());
                }
            }
        }
        (pieces.len() == segments.len()).then_some(parameters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn a_literal_route_takes_its_method_and_path_only() {
        let route = RouteKey::parse("POST /orders").expect("route");
        assert_eq!(route.matches("POST", "/orders"), params(&[]));
        assert_eq!(route.matches("GET", "/orders"), None);
        assert_eq!(route.matches("POST", "/orders/1"), None);
        assert_eq!(route.matches("POST", "/"), None);
    }

    #[test]
    fn parameters_take_one_segment_and_a_greedy_one_the_rest() {
        let one = RouteKey::parse("GET /orders/{id}").expect("route");
        assert_eq!(one.matches("GET", "/orders/o-1"), params(&[("id", "o-1")]));
        assert_eq!(one.matches("GET", "/orders/o-1/lines"), None);
        assert_eq!(one.matches("GET", "/orders/"), None);
        let any = RouteKey::parse("ANY /{proxy+}").expect("route");
        assert_eq!(
            any.matches("PATCH", "/a/b/c"),
            params(&[("proxy", "a/b/c")])
        );
        assert_eq!(
            any.matches("POST", "/"),
            None,
            "a greedy parameter takes at least one segment"
        );
        assert_eq!(any.as_str(), "ANY /{proxy+}");
    }

    #[test]
    fn default_takes_everything_and_bad_keys_are_refused() {
        let route = RouteKey::parse("$default").expect("route");
        assert_eq!(route.matches("DELETE", "/x"), params(&[]));
        for bad in ["", "POST", "POST orders", "GET /{rest+}/more"] {
            assert!(RouteKey::parse(bad).is_err(), "{bad:?}");
        }
    }
}
