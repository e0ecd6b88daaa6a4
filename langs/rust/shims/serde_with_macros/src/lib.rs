//! `#[serde_as]` for kiln's `serde_with` stand-in.
//!
//! On the item it decorates, every field attribute `#[serde_as(as = "T")]` becomes
//! `#[serde(with = "::serde_with::As::<T>")]` (and `serialize_as` / `deserialize_as` become
//! `serialize_with` / `deserialize_with` through `As::<T>::serialize` / `::deserialize`), which
//! serde's derives then use. It works on the token stream alone, so it needs no parser crate.

use proc_macro::{Delimiter, Group, TokenStream, TokenTree};
use std::str::FromStr;

#[proc_macro_attribute]
pub fn serde_as(_args: TokenStream, item: TokenStream) -> TokenStream {
    rewrite(item)
}

fn rewrite(stream: TokenStream) -> TokenStream {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    let mut out: Vec<TokenTree> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if let (TokenTree::Punct(hash), Some(TokenTree::Group(body))) = (&tokens[i], tokens.get(i + 1)) {
            if hash.as_char() == '#' && body.delimiter() == Delimiter::Bracket {
                if let Some(replaced) = serde_as_attribute(body) {
                    out.push(tokens[i].clone());
                    out.push(TokenTree::Group(replaced));
                    i += 2;
                    continue;
                }
            }
        }
        match &tokens[i] {
            TokenTree::Group(group) => {
                let mut inner = Group::new(group.delimiter(), rewrite(group.stream()));
                inner.set_span(group.span());
                out.push(TokenTree::Group(inner));
            }
            other => out.push(other.clone()),
        }
        i += 1;
    }
    out.into_iter().collect()
}

/// `[serde_as(key = "T", ...)]` -> `[serde(...)]`; None for any other attribute.
fn serde_as_attribute(body: &Group) -> Option<Group> {
    let inner: Vec<TokenTree> = body.stream().into_iter().collect();
    let args = match inner.as_slice() {
        [TokenTree::Ident(name), TokenTree::Group(args)] if name.to_string() == "serde_as" && args.delimiter() == Delimiter::Parenthesis => args,
        _ => return None,
    };
    let mut parts = Vec::new();
    let tokens: Vec<TokenTree> = args.stream().into_iter().collect();
    for entry in tokens.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ',')) {
        match entry {
            [] => {}
            [TokenTree::Ident(key), TokenTree::Punct(eq), TokenTree::Literal(value)] if eq.as_char() == '=' => {
                let ty = unquote(&value.to_string())?;
                let part = match key.to_string().as_str() {
                    "as" => format!("with = {:?}", format!("::serde_with::As::<{ty}>")),
                    "serialize_as" => format!("serialize_with = {:?}", format!("::serde_with::As::<{ty}>::serialize")),
                    "deserialize_as" => format!("deserialize_with = {:?}", format!("::serde_with::As::<{ty}>::deserialize")),
                    _ => return None,
                };
                parts.push(part);
            }
            _ => return None,
        }
    }
    let stream = TokenStream::from_str(&format!("serde({})", parts.join(", "))).ok()?;
    let mut group = Group::new(Delimiter::Bracket, stream);
    group.set_span(body.span());
    Some(group)
}

/// The text of a string literal token: "..." or r"..." / r#"..."#.
fn unquote(literal: &str) -> Option<String> {
    if let Some(raw) = literal.strip_prefix('r') {
        let hashes = raw.len() - raw.trim_start_matches('#').len();
        let body = &raw[hashes..raw.len() - hashes];
        return body.strip_prefix('"')?.strip_suffix('"').map(str::to_owned);
    }
    let body = literal.strip_prefix('"')?.strip_suffix('"')?;
    Some(body.replace("\\\"", "\"").replace("\\\\", "\\"))
}
