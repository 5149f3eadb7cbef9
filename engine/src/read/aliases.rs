//! Users' alias maps (namespace → the alias a user reads it by).

use cozo::DataValue;

use crate::store::{params, str_at, Result, Store};

/// The `(namespace, alias)` pairs of `user`'s own map.
pub fn user_pairs(store: &Store, user: &str) -> Result<Vec<(String, String)>> {
    let rows = store.query(
        "?[ns, alias] := *alias_map{user: $user, ns, alias}",
        params([("user", user.into())]),
    )?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect())
}

/// Replace `user`'s map with `pairs`, in one transaction.
pub fn replace_user_pairs<'a>(
    store: &Store,
    user: &str,
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<()> {
    let rows = DataValue::List(
        pairs
            .into_iter()
            .map(|(ns, a)| DataValue::List(vec![user.into(), ns.into(), a.into()]))
            .collect(),
    );
    store.write(
        "{?[user, ns] := *alias_map{user, ns}, user == $user :rm alias_map {user, ns}}
         {?[user, ns, alias] <- $rows :put alias_map {user, ns => alias}}",
        params([("user", user.into()), ("rows", rows)]),
    )?;
    Ok(())
}

/// Set the alias `user` reads `ns` by.
pub fn set_alias(store: &Store, user: &str, ns: &str, alias: &str) -> Result<()> {
    store.write(
        "?[user, ns, alias] <- [[$user, $ns, $alias]] :put alias_map {user, ns => alias}",
        params([("user", user.into()), ("ns", ns.into()), ("alias", alias.into())]),
    )?;
    Ok(())
}
