//! kiln's stand-in for the `serde_with` crate, which Debian 12 does not package.
//!
//! It covers what checkers use: `#[serde_as]` with `#[serde_as(as = "...")]` on fields, the
//! `SerializeAs` / `DeserializeAs` traits and `As`, and the converters `Same`, `DisplayFromStr`,
//! `DurationSeconds` and `DurationSecondsWithFrac` (formats `u64`/`i64`/`f64`/`String`), applied
//! through `Option`, `Vec`, `Box` and references. Output matches serde_with's: for example
//! `DurationSecondsWithFrac<String>` writes the seconds as the text of an f64 ("0.000012").

use std::fmt::Display;
use std::marker::PhantomData;
use std::str::FromStr;
use std::time::Duration;

use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use serde_with_macros::serde_as;

pub mod formats {
    //! Format and strictness markers of the duration converters.

    /// Deserialize only from the configured format (the default).
    pub struct Strict;
    /// Deserialize from a number or a numeric string.
    pub struct Flexible;

    pub trait Format {}
    impl Format for u64 {}
    impl Format for i64 {}
    impl Format for f64 {}
    impl Format for String {}

    pub trait Strictness {}
    impl Strictness for Strict {}
    impl Strictness for Flexible {}
}

use formats::{Format, Strict, Strictness};

/// Serialize a `T` the way the implementing converter says.
pub trait SerializeAs<T: ?Sized> {
    fn serialize_as<S: Serializer>(source: &T, serializer: S) -> Result<S::Ok, S::Error>;
}

/// Deserialize a `T` the way the implementing converter says.
pub trait DeserializeAs<'de, T>: Sized {
    fn deserialize_as<D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error>;
}

/// The bridge `#[serde_as(as = "T")]` expands to: `#[serde(with = "::serde_with::As::<T>")]`.
pub struct As<T: ?Sized>(PhantomData<T>);

impl<T: ?Sized> As<T> {
    pub fn serialize<S, I>(value: &I, serializer: S) -> Result<S::Ok, S::Error>
    where
        S: Serializer,
        I: ?Sized,
        T: SerializeAs<I>,
    {
        T::serialize_as(value, serializer)
    }

    pub fn deserialize<'de, D, I>(deserializer: D) -> Result<I, D::Error>
    where
        D: Deserializer<'de>,
        T: DeserializeAs<'de, I>,
    {
        T::deserialize_as(deserializer)
    }
}

/// The value's own Serialize / Deserialize.
pub struct Same;

impl<T: Serialize + ?Sized> SerializeAs<T> for Same {
    fn serialize_as<S: Serializer>(source: &T, serializer: S) -> Result<S::Ok, S::Error> {
        source.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> DeserializeAs<'de, T> for Same {
    fn deserialize_as<D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
        T::deserialize(deserializer)
    }
}

/// Through `Display` as a string, back through `FromStr`.
pub struct DisplayFromStr;

impl<T: Display + ?Sized> SerializeAs<T> for DisplayFromStr {
    fn serialize_as<S: Serializer>(source: &T, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(source)
    }
}

impl<'de, T> DeserializeAs<'de, T> for DisplayFromStr
where
    T: FromStr,
    T::Err: Display,
{
    fn deserialize_as<D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(D::Error::custom)
    }
}

impl<T, U: SerializeAs<T>> SerializeAs<Option<T>> for Option<U> {
    fn serialize_as<S: Serializer>(source: &Option<T>, serializer: S) -> Result<S::Ok, S::Error> {
        match source {
            Some(value) => serializer.serialize_some(&Wrap::<T, U>(value, PhantomData)),
            None => serializer.serialize_none(),
        }
    }
}

impl<T, U: SerializeAs<T>> SerializeAs<Vec<T>> for Vec<U> {
    fn serialize_as<S: Serializer>(source: &Vec<T>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(source.iter().map(|value| Wrap::<T, U>(value, PhantomData)))
    }
}

impl<T: ?Sized, U: SerializeAs<T>> SerializeAs<Box<T>> for Box<U> {
    fn serialize_as<S: Serializer>(source: &Box<T>, serializer: S) -> Result<S::Ok, S::Error> {
        U::serialize_as(source, serializer)
    }
}

impl<'a, T: ?Sized, U: SerializeAs<T>> SerializeAs<&'a T> for &'a U {
    fn serialize_as<S: Serializer>(source: &&'a T, serializer: S) -> Result<S::Ok, S::Error> {
        U::serialize_as(*source, serializer)
    }
}

impl<'de, T, U: DeserializeAs<'de, T>> DeserializeAs<'de, Option<T>> for Option<U> {
    fn deserialize_as<D: Deserializer<'de>>(deserializer: D) -> Result<Option<T>, D::Error> {
        Ok(Option::<Unwrap<T, U>>::deserialize(deserializer)?.map(|value| value.0))
    }
}

impl<'de, T, U: DeserializeAs<'de, T>> DeserializeAs<'de, Vec<T>> for Vec<U> {
    fn deserialize_as<D: Deserializer<'de>>(deserializer: D) -> Result<Vec<T>, D::Error> {
        Ok(Vec::<Unwrap<T, U>>::deserialize(deserializer)?.into_iter().map(|value| value.0).collect())
    }
}

/// A value serialized through converter `U`.
struct Wrap<'a, T: ?Sized, U>(&'a T, PhantomData<U>);

impl<T: ?Sized, U: SerializeAs<T>> Serialize for Wrap<'_, T, U> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        U::serialize_as(self.0, serializer)
    }
}

/// A value deserialized through converter `U`.
struct Unwrap<T, U>(T, PhantomData<U>);

impl<'de, T, U: DeserializeAs<'de, T>> Deserialize<'de> for Unwrap<T, U> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Unwrap(U::deserialize_as(deserializer)?, PhantomData))
    }
}

/// A `Duration` as whole seconds (rounded to the nearest), in `FORMAT` (u64, i64, f64, String).
pub struct DurationSeconds<FORMAT: Format = u64, STRICTNESS: Strictness = Strict>(PhantomData<(FORMAT, STRICTNESS)>);

/// A `Duration` as seconds with their fraction, in `FORMAT` (f64, String).
pub struct DurationSecondsWithFrac<FORMAT: Format = f64, STRICTNESS: Strictness = Strict>(PhantomData<(FORMAT, STRICTNESS)>);

fn rounded_seconds(duration: &Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_millis() >= 500)
}

impl<STRICTNESS: Strictness> SerializeAs<Duration> for DurationSeconds<u64, STRICTNESS> {
    fn serialize_as<S: Serializer>(source: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(rounded_seconds(source))
    }
}

impl<STRICTNESS: Strictness> SerializeAs<Duration> for DurationSeconds<i64, STRICTNESS> {
    fn serialize_as<S: Serializer>(source: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        let seconds = i64::try_from(rounded_seconds(source)).map_err(S::Error::custom)?;
        serializer.serialize_i64(seconds)
    }
}

impl<STRICTNESS: Strictness> SerializeAs<Duration> for DurationSeconds<f64, STRICTNESS> {
    fn serialize_as<S: Serializer>(source: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(rounded_seconds(source) as f64)
    }
}

impl<STRICTNESS: Strictness> SerializeAs<Duration> for DurationSeconds<String, STRICTNESS> {
    fn serialize_as<S: Serializer>(source: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&rounded_seconds(source).to_string())
    }
}

impl<STRICTNESS: Strictness> SerializeAs<Duration> for DurationSecondsWithFrac<f64, STRICTNESS> {
    fn serialize_as<S: Serializer>(source: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(source.as_secs_f64())
    }
}

impl<STRICTNESS: Strictness> SerializeAs<Duration> for DurationSecondsWithFrac<String, STRICTNESS> {
    fn serialize_as<S: Serializer>(source: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&source.as_secs_f64().to_string())
    }
}

/// Seconds as a JSON number or a numeric string, whichever the input has.
#[derive(Deserialize)]
#[serde(untagged)]
enum Seconds {
    Number(f64),
    Text(String),
}

fn duration_from<E: serde::de::Error>(seconds: Seconds) -> Result<Duration, E> {
    let value = match seconds {
        Seconds::Number(value) => value,
        Seconds::Text(text) => text.trim().parse::<f64>().map_err(E::custom)?,
    };
    if !value.is_finite() || value < 0.0 {
        return Err(E::custom(format!("{value} is not a valid duration in seconds")));
    }
    Ok(Duration::from_secs_f64(value))
}

impl<'de, FORMAT: Format, STRICTNESS: Strictness> DeserializeAs<'de, Duration> for DurationSeconds<FORMAT, STRICTNESS> {
    fn deserialize_as<D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let duration = duration_from::<D::Error>(Seconds::deserialize(deserializer)?)?;
        Ok(Duration::from_secs(rounded_seconds(&duration)))
    }
}

impl<'de, FORMAT: Format, STRICTNESS: Strictness> DeserializeAs<'de, Duration> for DurationSecondsWithFrac<FORMAT, STRICTNESS> {
    fn deserialize_as<D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        duration_from::<D::Error>(Seconds::deserialize(deserializer)?)
    }
}
